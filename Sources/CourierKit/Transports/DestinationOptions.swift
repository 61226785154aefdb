import CZlib
import Foundation

/// How Courier talks to one destination (`Configuration.destinations`, keyed by its origin).
///
///     configuration.destinations["https://api.example.com"] = DestinationOptions(gzip: true)
public struct DestinationOptions: Sendable, Hashable {
    /// Whether several messages go in one POST, and how many (`Batching`). The default, nil:
    /// one message per request, as most servers expect.
    public var batching: Batching?
    /// Whether each request's body goes gzip-compressed, with `Content-Encoding: gzip` (the
    /// server must accept it), unless gzip would not make it smaller (a body of a few dozen bytes:
    /// gzip's header and trailer alone are 18). The default is false. The bytes are the same on
    /// every attempt of a message (the log keeps the body as sent; compression is deterministic),
    /// and `prepareRequest` sees them compressed, so a signature over the body signs what is sent.
    /// A chat message of 191 bytes of JSON shrinks to 173; gzip pays on larger bodies.
    public var gzip: Bool

    /// Options for a destination; each defaults to the documented default of its property.
    public init(batching: Batching? = nil, gzip: Bool = false) {
        self.batching = batching
        self.gzip = gzip
    }
}

/// Several messages to one URL in one POST (`DestinationOptions.batching`): fewer requests, and
/// with `gzip`, far fewer bytes (50 of the benches' 150-byte messages: 29% of their bytes).
///
/// The body is a JSON array with one element per message, oldest first:
/// `[{"key": "<the message's id>", "body": <its JSON>}, …]`, and the request carries an
/// `Idempotency-Key` of the batch's own, derived from its messages' ids: the same on every retry
/// of the same batch. A 2xx delivers every message in it; any other outcome is each message's
/// failed attempt, judged by the retry policy one by one. Each message keeps its id, its events,
/// its callbacks and `delivered(_:)`.
///
/// What goes together: messages to the same URL due by `maximumDelay` after the batch goes, with
/// the same tags (an account's credentials are never mixed), JSON (`send`'s JSON forms, or
/// `send(data:)` as `application/json`) and no headers of their own (other messages go alone);
/// ordering keys hold (a key's next message waits for the batch before it). A message's first
/// attempt waits the whole `maximumDelay` for company, even once `maximumCount` are waiting.
/// Under `DeliveryOrder.fifoPerDestination` a URL's messages go one at a time, so never together.
public struct Batching: Sendable, Hashable {
    /// The most messages in one request (at least 1).
    public var maximumCount: Int
    /// The most body bytes of messages in one request, before compression (at least 1); a
    /// message larger than this alone goes alone.
    public var maximumBytes: Int
    /// How long a message's first attempt waits for others to go with it (not negative).
    public var maximumDelay: Duration

    public init(maximumCount: Int, maximumBytes: Int, maximumDelay: Duration) {
        self.maximumCount = maximumCount
        self.maximumBytes = maximumBytes
        self.maximumDelay = maximumDelay
    }
}

extension Courier.Configuration {
    /// The options of the destination `url` goes to, if `destinations` names its origin.
    func options(for url: String) -> DestinationOptions? {
        guard !destinations.isEmpty else { return nil }
        let origin = OriginTable.origin(of: url)
        return destinations.first { OriginTable.origin(of: $0.key) == origin }?.value
    }

    /// The batching destinations, by `OriginTable.origin(of:)`, for the projection.
    var batchingByOrigin: [String: Batching] {
        destinations.reduce(into: [:]) { table, entry in
            if let batching = entry.value.batching { table[OriginTable.origin(of: entry.key)] = batching }
        }
    }

    /// Whether `key` names an origin: an http or https scheme and a host, nothing after the port.
    static func isOrigin(_ key: String) -> Bool {
        guard let c = URLComponents(string: key), ["http", "https"].contains(c.scheme?.lowercased()),
            c.host?.isEmpty == false
        else { return false }
        return ["", "/"].contains(c.path) && c.query == nil && c.fragment == nil && c.user == nil
    }
}

/// gzip (RFC 1952) through the system's zlib: one deflate of the whole body, deterministic for
/// the same bytes (what an attempt's `Idempotency-Key` promises the server).
enum Gzip {
    /// `bytes` compressed, or nil if zlib failed (never seen: then the body goes as it is).
    static func compress(_ bytes: Data) -> Data? {
        var stream = z_stream()
        // Window bits 15 + 16: a gzip header and trailer (CRC-32, size) around the deflate stream.
        let size = Int32(MemoryLayout<z_stream>.size)
        guard
            deflateInit2_(
                &stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
                ZLIB_VERSION, size) == Z_OK
        else { return nil }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))))
        let status = bytes.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(out.count)
                return deflate(&stream, Z_FINISH)  // one call: the output holds the worst case
            }
        }
        return status == Z_STREAM_END ? Data(output.prefix(Int(stream.total_out))) : nil
    }
}

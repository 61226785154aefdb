import CourierLog
import Foundation

/// Everything needed to send a message again: what `enqueued` and `snapshot` records hold.
/// `package`, as the rest of the record format: the package's tools write golden records
/// (`wal-fixtures`) and fuzz the parser with it.
package struct MessageState: Sendable, Equatable {
    package var id: MessageID
    package var url: String
    /// Header name/value pairs sent with every attempt (Content-Type included).
    package var headers: [Header]
    package var body: [UInt8]
    package var createdMilliseconds: UInt64
    package var attempts: UInt32 = 0
    package var nextDueMilliseconds: UInt64
    /// Messages with the same key are delivered one after another, in send order.
    package var orderingKey: String? = nil
    /// The app's labels (`send(…tags:)`), sorted and distinct: what holds and tag cancels match.
    package var tags: [String] = []
    /// The key of `send(…replacing:)`: this message withdrew the one pending with the same key,
    /// and a later send with it withdraws this one.
    package var replacing: String? = nil
    /// `send(…expiry:)`, in ms: the message is abandoned once an attempt fails this long after
    /// `createdMilliseconds` (with `RetryPolicy.expiry`, whichever is sooner).
    package var expiryMilliseconds: UInt64? = nil

    package init(
        id: MessageID, url: String, headers: [Header], body: [UInt8], createdMilliseconds: UInt64,
        attempts: UInt32 = 0, nextDueMilliseconds: UInt64, orderingKey: String? = nil, tags: [String] = [],
        replacing: String? = nil, expiryMilliseconds: UInt64? = nil
    ) {
        self.id = id
        self.url = url
        self.headers = headers
        self.body = body
        self.createdMilliseconds = createdMilliseconds
        self.attempts = attempts
        self.nextDueMilliseconds = nextDueMilliseconds
        self.orderingKey = orderingKey
        self.tags = tags
        self.replacing = replacing
        self.expiryMilliseconds = expiryMilliseconds
    }

    /// Whether it may share a request with others (`Batching`): a JSON body and no headers of
    /// the app's (which could differ from the others').
    var isBatchable: Bool { headers == [Header(name: "Content-Type", value: "application/json")] }
}

package struct Header: Sendable, Hashable {
    package var name: String
    package var value: String

    package init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A state change: one record in the log. Layout of a message's record body (little-endian):
/// `u8 version = 1`, `16 bytes id`, then per kind:
///
///     enqueued, snapshot  string url · u8 header count · (string name, string value)* · blob body
///                         · u64 created ms · u32 attempts · u64 next due ms
///                         · [string ordering key · [u8 tag count · string tag* · [string replacing
///                         · [u64 expiry ms]]]]
///     attempted           u32 attempt · outcome · u64 next due ms
///     delivered           u32 attempt · u16 status · [u8 header count · (string name, string value)*
///                         · blob answer body]
///     abandoned           u32 attempt · string reason
///     cancelled           (nothing more)
///     handed-off          u32 attempt · u64 ticket · u64 task identifier · u64 earliest begin ms
///     outcome             u8 1 · u16 status · string retry-after   |   u8 2 · u8 failure kind · string message
///
/// A tag's record concerns no one message: `u8 version = 1 · string tag`, for `held` (the app
/// called `hold(tagged:)`) and `released` (`release(tagged:)`).
///
/// (`string` = u16 length + UTF-8, `blob` = u32 length + bytes.) The ordering key is there only
/// when the message has one, tags or a replacement key (then an empty key means none: keys are
/// never empty), the tags only when it has some or a replacement key (then a count of 0), and
/// the replacement key (`send(…replacing:)`) only when it has one or an expiry (then an empty
/// key means none), the expiry (`send(…expiry:)`) only when it has one; so a message with none of
/// them is byte for byte what it was before keys existed, one with a key but no tags what it was
/// before tags. A `delivered` record has the server's answer (`ServerAnswer`: the headers the app
/// keeps, the body's first 16 KiB) only when it has a header or a body. A reader older than a
/// field rejects a record that has it (as undecodable, reported).
package enum Event: Sendable, Equatable {
    case enqueued(MessageState)
    case attempted(MessageID, attempt: UInt32, outcome: DeliveryOutcome, nextDueMilliseconds: UInt64)
    /// With the server's answer: the headers the app keeps, sorted by name, and the body's first
    /// `ServerAnswer.maximumBodyBytes` (both empty for none).
    case delivered(MessageID, attempt: UInt32, status: UInt16, headers: [Header] = [], body: [UInt8] = [])
    case abandoned(MessageID, attempt: UInt32, reason: String)
    case snapshot(MessageState)
    /// The app withdrew the message with `Courier.cancel(_:)`.
    case cancelled(MessageID)
    /// The message was handed to a background upload session: attempt `attempt` is the
    /// session's task `task` (see `HandOff`).
    case handedOff(MessageID, HandOff)
    /// The app called `hold(tagged:)`: messages with the tag, now and later, wait until released.
    case held(tag: String)
    /// The app called `release(tagged:)`.
    case released(tag: String)

    static let version: UInt8 = 1
    /// Bytes of an `enqueued` or `snapshot` body besides its URL, headers and body.
    static let stateOverheadBytes = 1 + 16 + 2 + 1 + 4 + 8 + 4 + 8

    package var kind: RecordKind {
        switch self {
        case .enqueued: .enqueued
        case .attempted: .attempted
        case .delivered: .delivered
        case .abandoned: .abandoned
        case .snapshot: .snapshot
        case .cancelled: .cancelled
        case .handedOff: .handedOff
        case .held: .held
        case .released: .released
        }
    }

    /// The message the record concerns; nil for a tag's record.
    package var id: MessageID? {
        switch self {
        case .enqueued(let s), .snapshot(let s): s.id
        case .attempted(let id, _, _, _), .delivered(let id, _, _, _, _), .abandoned(let id, _, _), .cancelled(let id),
            .handedOff(let id, _):
            id
        case .held, .released: nil
        }
    }

    package func encoded() -> [UInt8] {
        var w = ByteWriter()
        if let s = fullState { w.bytes.reserveCapacity(64 + s.url.utf8.count + s.body.count + 32 * s.headers.count) }
        w.u8(Self.version)
        // A tag's record has no id: the version, then the tag.
        if let id = self.id { w.id(id) }
        switch self {
        case .enqueued(let s), .snapshot(let s):
            w.string(s.url)
            w.u8(UInt8(min(s.headers.count, 255)))
            for h in s.headers.prefix(255) {
                w.string(h.name)
                w.string(h.value)
            }
            w.u32(UInt32(s.body.count))  // a blob: u32 length, then the bytes
            w.bytes += s.body
            w.u64(s.createdMilliseconds)
            w.u32(s.attempts)
            w.u64(s.nextDueMilliseconds)
            let hasTail = s.replacing != nil || s.expiryMilliseconds != nil
            if s.orderingKey != nil || !s.tags.isEmpty || hasTail { w.string(s.orderingKey ?? "") }
            if !s.tags.isEmpty || hasTail {
                w.u8(UInt8(min(s.tags.count, 255)))
                for tag in s.tags.prefix(255) { w.string(tag) }
            }
            if hasTail { w.string(s.replacing ?? "") }
            if let expiry = s.expiryMilliseconds { w.u64(expiry) }
        case .attempted(_, let attempt, let outcome, let due):
            w.u32(attempt)
            switch outcome {
            case .response(let status, let retryAfter):
                w.u8(1)
                w.u16(UInt16(clamping: status))
                w.string(retryAfter ?? "")
            case .failure(let f):
                w.u8(2)
                w.u8(f.kind.rawValue)
                w.string(f.message)
            }
            w.u64(due)
        case .delivered(_, let attempt, let status, let headers, let body):
            w.u32(attempt)
            w.u16(status)
            guard !headers.isEmpty || !body.isEmpty else { break }
            w.u8(UInt8(min(headers.count, 255)))
            for h in headers.prefix(255) {
                w.string(h.name)
                w.string(h.value)
            }
            w.u32(UInt32(body.count))
            w.bytes += body
        case .abandoned(_, let attempt, let reason):
            w.u32(attempt)
            w.string(reason)
        case .cancelled:
            break
        case .held(let tag), .released(let tag):
            w.string(tag)
        case .handedOff(_, let task):
            w.u32(task.attempt)
            w.u64(task.ticket)
            w.u64(task.taskIdentifier)
            w.u64(task.earliestBeginMilliseconds)
        }
        return w.bytes
    }

    /// Decodes a record, or nil if it is not an event this version understands.
    package static func decode(kind: RecordKind, body: [UInt8]) -> Event? {
        body.withUnsafeBytes { decode(kind: kind, body: $0) }
    }

    /// The one parser of record bodies, so replay, reads and `wal-dump` cannot disagree on what a
    /// body says or whether it is valid: nil for a body this version did not write (a wrong
    /// version byte, a field cut short, text that is not UTF-8, an unknown kind or outcome, or
    /// bytes left over).
    package static func decode(kind: RecordKind, body: UnsafeRawBufferPointer) -> Event? {
        var r = ByteReader(body)
        guard r.u8() == version else { return nil }
        if kind == .held || kind == .released {
            guard let tag = r.string(), !tag.isEmpty, r.isAtEnd else { return nil }
            return kind == .held ? .held(tag: tag) : .released(tag: tag)
        }
        guard let id = r.id() else { return nil }
        let event: Event
        switch kind {
        case .enqueued, .snapshot:
            guard let state = MessageState(&r, id: id) else { return nil }
            event = kind == .snapshot ? .snapshot(state) : .enqueued(state)
        case .attempted:
            guard let attempt = r.u32(), let outcome = DeliveryOutcome(&r), let due = r.u64() else { return nil }
            event = .attempted(id, attempt: attempt, outcome: outcome, nextDueMilliseconds: due)
        case .delivered:
            guard let attempt = r.u32(), let status = r.u16() else { return nil }
            var headers: [Header] = [], body: [UInt8] = []
            if !r.isAtEnd {
                guard let count = r.u8() else { return nil }
                // Bounded by `count`, a u8.
                for _ in 0..<count {
                    guard let name = r.string(), let value = r.string() else { return nil }
                    headers.append(Header(name: name, value: value))
                }
                guard let n = r.u32(), let bytes = r.take(Int(n)), count > 0 || n > 0 else { return nil }
                body = Array(bytes)
            }
            event = .delivered(id, attempt: attempt, status: status, headers: headers, body: body)
        case .abandoned:
            guard let attempt = r.u32(), let reason = r.string() else { return nil }
            event = .abandoned(id, attempt: attempt, reason: reason)
        case .cancelled:
            event = .cancelled(id)
        case .handedOff:
            guard let attempt = r.u32(), let ticket = r.u64(), let task = r.u64(), let begin = r.u64() else {
                return nil
            }
            event = .handedOff(
                id, HandOff(attempt: attempt, ticket: ticket, taskIdentifier: task, earliestBeginMilliseconds: begin))
        default:
            return nil
        }
        return r.isAtEnd ? event : nil
    }
}

extension MessageState {
    /// The rest of an `enqueued` or `snapshot` body after its id, or nil (`Event.decode`).
    fileprivate init?(_ r: inout ByteReader, id: MessageID) {
        guard let url = r.string(), let count = r.u8() else { return nil }
        var headers: [Header] = []
        // Bounded by `count`, a u8 (at most 255 pairs).
        for _ in 0..<count {
            guard let name = r.string(), let value = r.string() else { return nil }
            headers.append(Header(name: name, value: value))
        }
        // The body is a blob: u32 length, then the bytes.
        guard let n = r.u32(), let body = r.take(Int(n)), let created = r.u64(), let attempts = r.u32(),
            let due = r.u64()
        else { return nil }
        var key: String?
        var tags: [String] = []
        if !r.isAtEnd {
            // An empty key stands for none, and only before tags: one encoding per state.
            guard let k = r.string(), !k.isEmpty || !r.isAtEnd else { return nil }
            key = k.isEmpty ? nil : k
        }
        if !r.isAtEnd {
            // Written when there are tags, each non-empty, or a replacement key (a count of 0 only
            // then: one encoding per state).
            guard let count = r.u8() else { return nil }
            // Bounded by `count`, a u8.
            for _ in 0..<count {
                guard let tag = r.string(), !tag.isEmpty else { return nil }
                tags.append(tag)
            }
            if count == 0 && r.isAtEnd { return nil }
        }
        var replacing: String?
        if !r.isAtEnd {
            // An empty replacement key stands for none, and only before an expiry.
            guard let k = r.string(), !k.isEmpty || !r.isAtEnd else { return nil }
            replacing = k.isEmpty ? nil : k
        }
        var expiry: UInt64?
        if !r.isAtEnd {
            guard let ms = r.u64() else { return nil }
            expiry = ms
        }
        self.init(
            id: id, url: url, headers: headers, body: Array(body), createdMilliseconds: created, attempts: attempts,
            nextDueMilliseconds: due, orderingKey: key, tags: tags, replacing: replacing, expiryMilliseconds: expiry)
    }
}

extension DeliveryOutcome {
    /// An `attempted` body's outcome, or nil (`Event.decode`).
    fileprivate init?(_ r: inout ByteReader) {
        switch r.u8() {
        case 1:
            guard let status = r.u16(), let retryAfter = r.string() else { return nil }
            self = .response(status: Int(status), retryAfter: retryAfter.isEmpty ? nil : retryAfter)
        case 2:
            guard let raw = r.u8(), let kind = TransportFailure.Kind(rawValue: raw), let message = r.string() else {
                return nil
            }
            self = .failure(TransportFailure(kind, message))
        default:
            return nil
        }
    }

    /// Whether the answer carried a `Retry-After` the policy honours, so the next due time may
    /// be the server's rather than backoff's (replay reads it from each `attempted` record).
    var carriesRetryAfter: Bool {
        guard case .response(let status, let header?) = self else { return false }
        return Self.honoursRetryAfter(status: status) && !header.isEmpty
    }
}

/// Little-endian writer and bounds-checked reader for event bodies. The reader returns nil on
/// any short or malformed field instead of trapping: bodies come from disk.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { bytes.append(UInt8(v & 0xFF)); bytes.append(UInt8(v >> 8)) }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func id(_ id: MessageID) { withUnsafeBytes(of: id.uuid) { bytes.append(contentsOf: $0) } }
    /// A string of at most 65,535 UTF-8 bytes. Callers validate what the app gives; a longer
    /// string from elsewhere (a transport's message, a `Retry-After` header) is cut before the
    /// character the limit falls in, so that the record still reads back as UTF-8.
    mutating func string(_ s: String) {
        var utf8 = s.utf8.prefix(Int(UInt16.max))
        if utf8.endIndex < s.utf8.endIndex, s.utf8[utf8.endIndex] & 0xC0 == 0x80 {
            // Bounded: a character is at most 4 bytes.
            while let last = utf8.last, last & 0xC0 == 0x80 { utf8 = utf8.dropLast() }
            utf8 = utf8.dropLast()  // its first byte
        }
        u16(UInt16(utf8.count))
        bytes += utf8
    }
}

/// Reads fields from a body in place (the caller keeps the bytes alive). Every accessor
/// returns nil instead of reading past the end.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func take(_ n: Int) -> UnsafeRawBufferPointer? {
        guard n >= 0, n <= bytes.count - offset else { return nil }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)])
    }

    mutating func u8() -> UInt8? { take(1)?.first }
    mutating func u16() -> UInt16? { take(2).map { $0.loadUnaligned(as: UInt16.self).littleEndian } }
    mutating func u32() -> UInt32? { take(4).map { $0.loadUnaligned(as: UInt32.self).littleEndian } }
    mutating func u64() -> UInt64? { take(8).map { $0.loadUnaligned(as: UInt64.self).littleEndian } }

    /// A string, checked to be valid UTF-8.
    mutating func string() -> String? {
        guard let n = u16(), let b = take(Int(n)), isWellFormedUTF8(b) else { return nil }
        return String(decoding: b, as: UTF8.self)
    }

    mutating func id() -> MessageID? { take(16).map { MessageID(UUID(uuid: $0.loadUnaligned(as: uuid_t.self))) } }
}

/// Whether `bytes` are well-formed UTF-8: no stray continuation byte, overlong form, surrogate
/// or value past U+10FFFF. (`String(validating:as:)` answers the same from iOS 18 and macOS 15
/// on; Courier runs from iOS 16, and replay reads every stored string through this.)
package func isWellFormedUTF8<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
    // ASCII (nearly always) is well-formed: check that first, cheaply.
    if bytes.allSatisfy({ $0 < 0x80 }) { return true }
    // The standard library's UTF-8 parser, stopping at the first error (it says whether it met one).
    return !transcode(bytes.makeIterator(), from: UTF8.self, to: UTF32.self, stoppingOnError: true) { _ in }
}

import CourierLog
import Foundation

extension Courier {
    /// Sends a JSON object. Returns at once, with the message on disk.
    ///
    /// Values may be `String`, numbers (finite), `Bool`, `NSNull`, and arrays and dictionaries
    /// of these. Anything else (a `Date`, `Data`, a custom object, NaN) throws `.invalidJSON`
    /// and writes nothing.
    /// - Parameters:
    ///   - headers: extra request headers (`Content-Type` and `Idempotency-Key` are set for you).
    ///   - onDelivered: called once, on a background thread, when the server answered 2xx.
    ///   - onAbandoned: called once if the retry policy gives up (never, by default).
    ///   Callbacks live in memory: after a restart, follow messages with `delivered(_:)` or
    ///   `events` instead.
    @discardableResult
    public func send(_ json: [String: Any], to url: URL, headers: [String: String] = [:],
                     onDelivered: (@Sendable (MessageID) -> Void)? = nil,
                     onAbandoned: (@Sendable (MessageID, CourierError) -> Void)? = nil) throws(CourierError) -> MessageID {
        let body = try JSONBody.serialize(json)
        return try enqueue(body: body, contentType: "application/json", url: url, headers: headers,
                           callbacks: Callbacks(onDelivered: onDelivered, onAbandoned: onAbandoned))
    }

    /// Sends any `Encodable` value, encoded with `JSONEncoder` (sorted keys).
    @discardableResult
    public func send(_ value: some Encodable, to url: URL, headers: [String: String] = [:],
                     onDelivered: (@Sendable (MessageID) -> Void)? = nil,
                     onAbandoned: (@Sendable (MessageID, CourierError) -> Void)? = nil) throws(CourierError) -> MessageID {
        let body = try JSONBody.encode(value)
        return try enqueue(body: body, contentType: "application/json", url: url, headers: headers,
                           callbacks: Callbacks(onDelivered: onDelivered, onAbandoned: onAbandoned))
    }

    /// Sends bytes as they are, with the given `Content-Type`.
    @discardableResult
    public func send(data: Data, contentType: String = "application/json", to url: URL, headers: [String: String] = [:],
                     onDelivered: (@Sendable (MessageID) -> Void)? = nil,
                     onAbandoned: (@Sendable (MessageID, CourierError) -> Void)? = nil) throws(CourierError) -> MessageID {
        try enqueue(body: Array(data), contentType: contentType, url: url, headers: headers,
                    callbacks: Callbacks(onDelivered: onDelivered, onAbandoned: onAbandoned))
    }

    private func enqueue(body: [UInt8], contentType: String, url: URL, headers: [String: String],
                         callbacks: Callbacks) throws(CourierError) -> MessageID {
        try Self.validate(url)
        try Self.validate(headers)
        guard body.count <= configuration.maximumMessageSize else {
            throw CourierError(.messageTooLarge, "\(body.count) bytes; the limit is \(configuration.maximumMessageSize) (Configuration.maximumMessageSize)")
        }
        let id = configuration.makeMessageID()
        let now = wallNowMilliseconds()
        var allHeaders = [Header(name: "Content-Type", value: contentType)]
        for (name, value) in headers.sorted(by: { $0.key < $1.key })
        where name.lowercased() != "content-type" && name.lowercased() != "idempotency-key" {
            allHeaders.append(Header(name: name, value: value))
        }
        let event = Event.enqueued(MessageState(id: id, url: url.absoluteString, headers: allHeaders, body: body,
                                                createdMilliseconds: now, nextDueMilliseconds: now))
        let encoded = event.encoded()
        let effects = try lock.locked { () throws(CourierError) -> Effects in
            guard !core.closed else { throw CourierError(.closed, "the courier is closed") }
            guard log.sizeBytes + encoded.count <= configuration.maximumStorageBytes else {
                throw CourierError(.storageFull, "the log holds \(log.sizeBytes) bytes; the limit is \(configuration.maximumStorageBytes) (Configuration.maximumStorageBytes)")
            }
            let sequence: UInt64
            do throws(LogError) {
                sequence = try log.append(encoded, kind: .enqueued)
            } catch {
                throw CourierError(error)
            }
            core.scheduler.apply(event, sequence: sequence)
            if callbacks.onDelivered != nil || callbacks.onAbandoned != nil { core.callbacks[id] = callbacks }
            var effects = Effects()
            effects.events = [.enqueued(id)]
            effects.subscribers = Array(core.subscribers.values)
            return effects
        }
        if configuration.durability == .always {
            do throws(LogError) { try log.sync() } catch { throw CourierError(error) }
        }
        effects.run()
        pump()
        return id
    }

    static func validate(_ headers: [String: String]) throws(CourierError) {
        guard headers.count <= 200 else { throw CourierError(.invalidHeaders, "\(headers.count) headers; at most 200") }
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.count <= 8192, value.utf8.count <= 8192 else {
                throw CourierError(.invalidHeaders, "header \"\(name.prefix(40))\": empty name, or name or value over 8 KiB")
            }
            // Scalars, not Characters: "\r\n" is one Character, equal to neither "\r" nor "\n".
            guard !(name + value).unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw CourierError(.invalidHeaders, "header \"\(name.prefix(40))\" contains a line break")
            }
        }
    }

    static func validate(_ url: URL) throws(CourierError) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw CourierError(.invalidURL, "\(url): only http and https URLs can be delivered to")
        }
        guard let host = url.host, !host.isEmpty else {
            throw CourierError(.invalidURL, "\(url): no host")
        }
        guard url.absoluteString.utf8.count < Int(UInt16.max) else {
            throw CourierError(.invalidURL, "URL longer than 65,535 bytes")
        }
    }
}

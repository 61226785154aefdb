import Foundation

extension Courier {
    /// Sends a JSON object. Returns at once, with the message on disk.
    ///
    /// Values may be `String`, numbers (finite), `Bool`, `NSNull`, and arrays and dictionaries
    /// of these. Anything else (a `Date`, `Data`, a custom object, NaN) throws `.invalidJSON`
    /// and writes nothing.
    /// - Parameters:
    ///   - json: the object to POST, serialized with sorted keys.
    ///   - url: an absolute http or https URL.
    ///   - orderingKey: messages with the same key are delivered one after another, in send
    ///     order, across restarts: the next is not attempted before the previous one was
    ///     delivered or abandoned. Messages with different keys, or none (the default), never
    ///     wait for each other. A chat app passes the conversation id. At most 1 KiB of UTF-8.
    ///   - headers: extra request headers. `Content-Type` (`application/json`) and
    ///     `Idempotency-Key` (the message id) are set by Courier; passing either throws
    ///     `.invalidHeaders`.
    ///   - tags: the app's labels for the message, stored with it: `prepareRequest` reads them
    ///     (`DeliveryRequest.tags`, to pick the right account's credentials), `hold(tagged:)`,
    ///     `release(tagged:)` and `cancel(tagged:)` act on them. At most 32, each 1 to 256 bytes
    ///     of UTF-8 (else `.invalidTags`). A message sent with a held tag waits until released.
    ///   - replacing: a key naming what the message stands for (`"presence"`, `"draft:42"`): the
    ///     pending message sent with the same key, if any, is withdrawn, as `cancel(_:)` withdraws
    ///     one (`.cancelled`), by this message's own record, so after a crash one of the two is
    ///     pending, never both or neither. An attempt of it already under way finishes, and its
    ///     outcome is ignored. Only the newest matters: read receipts, a location, a draft's
    ///     autosave. At most 1 KiB of UTF-8 (else `.invalidOrderingKey`). The default, nil, replaces
    ///     nothing.
    ///   - expiry: how long the message is worth sending (a presence, a location): once an
    ///     attempt fails this long after `send`, or its next one would come later, it is abandoned
    ///     (`AbandonReason.expired`), as `RetryPolicy.expiry` abandons every message (the sooner of
    ///     the two applies; `.zero`: one attempt). Stored with the message. The default, nil, leaves
    ///     it to `RetryPolicy.expiry`.
    ///   - onDelivered: called once, on a background thread, when the server answered 2xx.
    ///     Keep it short and never block or wait in it: it runs on the delivery task that heard
    ///     the answer.
    ///   - onAbandoned: called once if the retry policy gives up (never, by default), on a thread
    ///     like `onDelivered`'s; or if a later send drops the message at
    ///     `Configuration.maximumPendingMessages`, on that `send`'s thread.
    ///   Callbacks live in memory: after a restart, follow messages with `delivered(_:)` or
    ///   `events()` instead.
    @discardableResult
    public func send(
        _ json: [String: Any], to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = [], replacing: String? = nil, expiry: Duration? = nil,
        onDelivered: (@Sendable (MessageID) -> Void)? = nil,
        onAbandoned: (@Sendable (MessageID, CourierError) -> Void)? = nil
    ) throws(CourierError) -> MessageID {
        try enqueue(
            body: JSONBody.serialize(json), contentType: "application/json", url: url,
            labels: Labels(
                orderingKey: orderingKey, headers: headers, tags: tags, replacing: replacing, expiry: expiry),
            callbacks: Callbacks(onDelivered: onDelivered, onAbandoned: onAbandoned))
    }

    /// Sends any `Encodable` value as JSON, encoded by `encoder`, or, without one, by a
    /// `JSONEncoder` with sorted keys. Give your own for your server's conventions
    /// (`.convertToSnakeCase`, `.iso8601` dates, …); it is used on the calling thread, once.
    @discardableResult
    public func send(
        _ value: some Encodable, to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = [], replacing: String? = nil, expiry: Duration? = nil,
        encoder: JSONEncoder? = nil,
        onDelivered: (@Sendable (MessageID) -> Void)? = nil,
        onAbandoned: (@Sendable (MessageID, CourierError) -> Void)? = nil
    ) throws(CourierError) -> MessageID {
        try enqueue(
            body: JSONBody.encode(value, with: encoder), contentType: "application/json", url: url,
            labels: Labels(
                orderingKey: orderingKey, headers: headers, tags: tags, replacing: replacing, expiry: expiry),
            callbacks: Callbacks(onDelivered: onDelivered, onAbandoned: onAbandoned))
    }

    /// Sends bytes as they are, with the given `Content-Type` (required: bytes carry no type). To
    /// a batching destination (`Batching`), bytes sent as `application/json` go in a batch, so
    /// they must be JSON (else `.invalidJSON`).
    @discardableResult
    public func send(
        data: Data, contentType: String, to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = [], replacing: String? = nil, expiry: Duration? = nil,
        onDelivered: (@Sendable (MessageID) -> Void)? = nil,
        onAbandoned: (@Sendable (MessageID, CourierError) -> Void)? = nil
    ) throws(CourierError) -> MessageID {
        if contentType == "application/json", configuration.options(for: url.absoluteString)?.batching != nil,
            (try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)) == nil
        {
            throw CourierError(.invalidJSON, "the body is not JSON, and its destination batches JSON messages")
        }
        return try enqueue(
            body: Array(data), contentType: contentType, url: url,
            labels: Labels(
                orderingKey: orderingKey, headers: headers, tags: tags, replacing: replacing, expiry: expiry),
            callbacks: Callbacks(onDelivered: onDelivered, onAbandoned: onAbandoned))
    }

    /// What a send says about its message besides the body and destination.
    struct Labels {
        var orderingKey: String?
        var headers: [String: String]
        var tags: Set<String>
        var replacing: String? = nil
        var expiry: Duration? = nil
        /// An id chosen before (an extension's message keeps the id its `send` returned).
        var id: MessageID?
        /// When it was sent, if before this call (an extension's `send`): `expiry` counts from it.
        var createdMilliseconds: UInt64?
    }

    func enqueue(
        body: [UInt8], contentType: String, url: URL, labels: Labels, callbacks: Callbacks
    ) throws(CourierError) -> MessageID {
        try Signposts.interval("send") { () throws(CourierError) -> MessageID in
            let target = try Self.validatedTarget(url)
            let instant = currentInstant()
            var message = try Self.validatedState(
                id: labels.id ?? configuration.makeMessageID(), target: target, body: body,
                contentType: contentType, labels: labels, nowMilliseconds: instant.wallMilliseconds,
                maximumMessageBytes: configuration.maximumMessageBytes)
            if let batching = configuration.options(for: target)?.batching, batching.maximumCount > 1,
                message.isBatchable
            {
                message.nextDueMilliseconds += NextDue.milliseconds(batching.maximumDelay)  // waits for company
            }
            let encoded = Event.enqueued(message).encoded()
            // Refused before anything is written if the log could not hold it in one record whatever
            // its compression: the writer would refuse it too, and a reader could never meet a record
            // the writer did not accept.
            guard encoded.count <= maximumRecordBytes else {
                throw CourierError(
                    .messageTooLarge,
                    "the message (body \(body.count) bytes, with its URL and headers \(encoded.count) bytes) does not "
                        + "fit one record of a \(configuration.segmentSizeBytes)-byte segment (at most "
                        + "\(maximumRecordBytes) bytes); raise Configuration.segmentSizeBytes"
                )
            }
            // One critical section in the core: the append, the projection change and the plan
            // together, so log order is projection order (under `.always`, a second one after the
            // fsync: `CourierCore.write`).
            let effects = try core.enqueue(encoded, state: message, callbacks: callbacks, at: instant)
            effects.run()
            if let failure = effects.syncFailure { throw failure }
            return message.id
        }
    }

    /// A send's state as stored, once its labels, content type and body size are valid: Courier's
    /// headers first (`Content-Type`), then the app's, sorted by name; tags sorted; due now. What
    /// `send` and `ExtensionOutbox.send` store (`target` is the URL, validated already).
    static func validatedState(
        id: MessageID, target: String, body: [UInt8], contentType: String, labels: Labels,
        nowMilliseconds now: UInt64, maximumMessageBytes: Int
    ) throws(CourierError) -> MessageState {
        for (name, key) in [("ordering", labels.orderingKey), ("replacement", labels.replacing)] {
            guard let key, key.isEmpty || key.utf8.count > 1024 else { continue }
            throw CourierError(
                .invalidOrderingKey, "\(name) key of \(key.utf8.count) bytes: it must be 1 to 1,024 bytes of UTF-8")
        }
        guard labels.headers.count <= 200 else {
            throw CourierError(.invalidHeaders, "\(labels.headers.count) headers; at most 200")
        }
        for (name, value) in labels.headers {
            // Headers Courier sets itself: a caller passing one gets `.invalidHeaders`, never a silent drop.
            if ["content-type", "idempotency-key"].contains(name.lowercased()) {
                throw CourierError(
                    .invalidHeaders,
                    "header \"\(name)\" is set by Courier: the content type comes from send(data:contentType:to:) "
                        + "(application/json for JSON sends), and Idempotency-Key is always the message id"
                )
            }
            guard !name.isEmpty, name.utf8.count <= 8192, value.utf8.count <= 8192 else {
                throw CourierError(
                    .invalidHeaders, "header \"\(name.prefix(40))\": empty name, or name or value over 8 KiB")
            }
            // Scalars, not Characters: "\r\n" is one Character, equal to neither "\r" nor "\n".
            guard !(name + value).unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw CourierError(.invalidHeaders, "header \"\(name.prefix(40))\" contains a line break")
            }
        }
        guard labels.tags.count <= maximumTagCount else {
            throw CourierError(.invalidTags, "\(labels.tags.count) tags; at most \(maximumTagCount)")
        }
        for tag in labels.tags where !isValid(tag: tag) {
            throw CourierError(
                .invalidTags, "tag \"\(tag.prefix(40))\": a tag is 1 to \(maximumTagBytes) bytes of UTF-8")
        }
        guard !contentType.isEmpty, contentType.utf8.count <= 8192,
            !contentType.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" })
        else {
            throw CourierError(
                .invalidHeaders, "contentType must be a non-empty header value of at most 8 KiB without line breaks")
        }
        guard body.count <= maximumMessageBytes else {
            throw CourierError(
                .messageTooLarge,
                "\(body.count) bytes; the limit is \(maximumMessageBytes) (Configuration.maximumMessageBytes)")
        }
        let headers = labels.headers.sorted(by: { $0.key < $1.key }).map { Header(name: $0.key, value: $0.value) }
        return MessageState(
            id: id, url: target, headers: [Header(name: "Content-Type", value: contentType)] + headers, body: body,
            createdMilliseconds: min(now, labels.createdMilliseconds ?? now), nextDueMilliseconds: now,
            orderingKey: labels.orderingKey, tags: labels.tags.sorted(), replacing: labels.replacing,
            expiryMilliseconds: labels.expiry.map { UInt64(min(max(0, $0.seconds * 1000), 1e15)) })
    }

    /// The most tags one message may carry, and the longest tag (UTF-8 bytes).
    static let maximumTagCount = 32
    static let maximumTagBytes = 256

    static func isValid(tag: String) -> Bool { !tag.isEmpty && tag.utf8.count <= maximumTagBytes }

    /// `url` validated, as the string stored in the log.
    static func validatedTarget(_ url: URL) throws(CourierError) -> String {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw CourierError(.invalidURL, "\(url): only http and https URLs can be delivered to")
        }
        guard let host = url.host, !host.isEmpty else {
            throw CourierError(.invalidURL, "\(url): no host")
        }
        let string = url.absoluteString
        guard string.utf8.count < Int(UInt16.max) else {
            throw CourierError(.invalidURL, "URL longer than 65,535 bytes")
        }
        return string
    }
}

/// Identifies one message for its whole life. Its `description` is exactly the value sent in
/// the `Idempotency-Key` header, so a server can drop the duplicates that at-least-once
/// delivery produces.
public struct MessageID: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    /// The UUID behind the id.
    public let uuid: UUID

    /// A new random (version 4) id, unless given a UUID.
    public init(_ uuid: UUID = UUID()) { self.uuid = uuid }

    /// Parses the `description` form (a UUID, any case).
    public init?(_ string: String) {
        guard let uuid = UUID(uuidString: string) else { return nil }
        self.uuid = uuid
    }

    /// Lower-case UUID, e.g. `7c0f3a52-5d7b-4a43-9d2e-2f1b3f5d9a10`.
    public var description: String { uuid.uuidString.lowercased() }

    /// The order of `description`s, compared byte by byte (lower-case hex in fixed places
    /// sorts as the bytes it spells), without making either string.
    public static func < (a: MessageID, b: MessageID) -> Bool {
        withUnsafeBytes(of: a.uuid.uuid) { x in withUnsafeBytes(of: b.uuid.uuid) { y in x.lexicographicallyPrecedes(y) }
        }
    }

    /// Decodes the id from its string form (the `Idempotency-Key`).
    public init(from decoder: any Decoder) throws {
        let string = try decoder.singleValueContainer().decode(String.self)
        guard let id = MessageID(string) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a message id: \(string)"))
        }
        self = id
    }

    /// Encodes the id as its string form (the `Idempotency-Key`).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

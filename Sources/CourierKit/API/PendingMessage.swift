import Foundation

/// A message not yet delivered or abandoned, as `Courier.pendingMessages` reports it.
public struct PendingMessage: Sendable, Hashable {
    /// The id `send` returned.
    public var id: MessageID
    /// Where it is POSTed.
    public var url: URL
    /// Exactly the bytes that are POSTed.
    public var body: Data
    /// Attempts made so far, across restarts.
    public var attempts: Int
    /// When `send` was called.
    public var sentAt: Date
    /// When the next attempt is due (in the past if it is due now or in flight).
    public var nextAttemptAt: Date
    /// The key `send` was given: messages sharing it are delivered in send order.
    public var orderingKey: String?
    /// Whether the background upload session has it now (`appDidEnterBackground()`).
    public var isHandedOff: Bool
    /// The tags `send` was given.
    public var tags: Set<String>
    /// Whether a held tag keeps it from delivery now (`hold(tagged:)`).
    public var isHeld: Bool

    /// A pending message with these fields (tests build them; Courier reports them).
    public init(
        id: MessageID, url: URL, body: Data, attempts: Int, sentAt: Date, nextAttemptAt: Date,
        orderingKey: String? = nil, isHandedOff: Bool = false, tags: Set<String> = [], isHeld: Bool = false
    ) {
        self.orderingKey = orderingKey
        self.isHandedOff = isHandedOff
        self.tags = tags
        self.isHeld = isHeld
        self.id = id
        self.url = url
        self.body = body
        self.attempts = attempts
        self.sentAt = sentAt
        self.nextAttemptAt = nextAttemptAt
    }
}

extension Courier {
    /// Every pending message, oldest first: for a screen that lists what is still on its way,
    /// including messages sent before a restart. Bodies are read back from the log (one read
    /// per message), off the caller's thread. A message whose record cannot be read is left
    /// out (`recovery` and `events()` report damage).
    public func pendingMessages() async -> [PendingMessage] {
        let ids = core.pendingIDs
        return await onIOQueue(readQueue) { [self] in loadPendingMessages(ids) }
    }

    /// The pending messages now, oldest first, and a stream of everything that happens from
    /// that instant on (as `events()`): a screen that lists messages and then follows them
    /// misses no update in between, whatever the engine does meanwhile.
    ///
    ///     let (pending, events) = await courier.pendingMessagesAndEvents()
    ///     rows = pending.map(Row.init)
    ///     for await event in events { apply(event) }
    public func pendingMessagesAndEvents() async -> (pending: [PendingMessage], events: AsyncStream<CourierEvent>) {
        let (events, ids) = subscribe(pendingIDs: true)
        let pending = await onIOQueue(readQueue) { [self] in loadPendingMessages(ids) }
        return (pending, events)
    }

    /// The pending messages among `ids`, read back from the log, in that order.
    private func loadPendingMessages(_ ids: [MessageID]) -> [PendingMessage] {
        let status = core.status
        return ids.compactMap { id in
            guard let s = try? core.loadState(id), let url = URL(string: s.url) else { return nil }
            return PendingMessage(
                id: s.id, url: url, body: Data(s.body), attempts: Int(s.attempts),
                sentAt: Date(timeIntervalSince1970: Double(s.createdMilliseconds) / 1000),
                nextAttemptAt: Date(timeIntervalSince1970: Double(s.nextDueMilliseconds) / 1000),
                orderingKey: s.orderingKey, isHandedOff: status.handOffs[id] != nil, tags: Set(s.tags),
                isHeld: !status.heldTags.isDisjoint(with: s.tags))
        }
    }
}

/// Scoping messages with tags (`send(…tags:)`): holding them until consent or sign-in,
/// releasing them, and dropping one account's messages at logout. See the DocC article
/// "Accounts and consent" for the recipes.
///
/// Holds and tag cancels are state changes like any other: logged (`held`, `released`,
/// `cancelled` records), so they survive a restart, and durable as `durability` says (under
/// `.always`, before the call returns, so it blocks for an fsync as `send` does).
extension Courier {
    /// Withdraws every pending message tagged `tag`, for good, as `cancel(_:)` withdraws one
    /// (their callbacks are not called; `events()` reports `.cancelled` for each; an attempt
    /// under way is not stopped, and its outcome is ignored). Messages sent later with the tag
    /// are not affected. The records land in as few batches as fit a log segment, each whole or
    /// not at all.
    /// - Returns: how many messages were cancelled (0 for a tag no pending message has, or
    ///   once the courier is closed).
    @discardableResult
    public func cancel(tagged tag: String) -> Int {
        guard Self.isValid(tag: tag) else { return 0 }
        let cancelled = core.handle(.cancelTagged(tag)).run().count
        if cancelled > 0 { pump() }
        return cancelled
    }

    /// Keeps every message tagged `tag`, pending now or sent later, from any attempt and any
    /// background hand-off until `release(tagged:)`, across restarts. An attempt already under
    /// way finishes (and is logged) as usual; a message already handed to the background
    /// session stays with it. A held message keeps its place in its ordering key's order, so
    /// the messages behind it wait too. `waitUntilIdle()` does not wait for held messages.
    /// Holding a tag that is held already changes nothing. A tag that no message could carry
    /// (empty, or over 256 bytes) is ignored.
    /// - Returns: how many pending messages carry the tag.
    @discardableResult
    public func hold(tagged tag: String) -> Int {
        guard Self.isValid(tag: tag) else {
            configuration.logger.warning("hold(tagged:) ignored an invalid tag (empty, or over 256 bytes)")
            return 0
        }
        return core.handle(.hold(tag: tag)).run().count
    }

    /// Ends `hold(tagged: tag)`: its messages are attempted again at their own due times, unless
    /// another held tag keeps them. Releasing a tag that is not held changes nothing.
    /// - Returns: how many pending messages carry the tag.
    @discardableResult
    public func release(tagged tag: String) -> Int {
        guard Self.isValid(tag: tag) else { return 0 }
        return core.handle(.release(tag: tag), at: currentInstant()).run().count
    }

    /// The tags held now (`hold(tagged:)`), sorted: after a restart, what the log says.
    public var heldTags: [String] { core.status.heldTags.sorted() }
}

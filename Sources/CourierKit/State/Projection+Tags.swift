/// Holds and releases by tag (`Courier.hold(tagged:)`, `release(tagged:)`): a held message is
/// out of the heap and the parked queues, so neither an attempt nor a hand-off can take it
/// (both take only from there: `Projection+Selection.swift`). Its place in its lane stays, so
/// the messages behind it with the same ordering key wait too: order is kept, not skipped.
extension Projection {
    /// Holds `tag`: its pending messages, and later ones, leave the schedule. Returns how many
    /// pending messages carry it (an attempt already under way for one of them finishes).
    @discardableResult
    mutating func holdTag(_ tag: String) -> Int {
        let tagged = tags.slots(tagged: tag)
        guard tags.hold(tag) else { return tagged.count }
        // Bounded by the messages carrying the tag.
        for i in tagged where !slots[Int(i)].flags.contains(.heldByTag) {
            if slots[Int(i)].flags.contains(.parked) { unparked(i) }
            if slots[Int(i)].heapIndex != Self.notInHeap { heapRemove(i) }
            slots[Int(i)].flags.insert(.heldByTag)
            heldCount += 1
        }
        return tagged.count
    }

    /// Releases `tag`: its messages no other held tag keeps are scheduled again, at their own
    /// due times. Returns how many pending messages carry it.
    @discardableResult
    mutating func releaseTag(_ tag: String) -> Int {
        let tagged = tags.slots(tagged: tag)
        guard tags.release(tag) else { return tagged.count }
        // In arrival order, so messages due at the same time keep their order in the heap.
        let ordered = tagged.sorted { slots[Int($0)].order < slots[Int($1)].order }
        // Bounded by the messages carrying the tag.
        for i in ordered where slots[Int(i)].flags.contains(.heldByTag) && !tags.isHeld(slot: i) {
            slots[Int(i)].flags.remove(.heldByTag)
            heldCount -= 1
            reschedule(i)
        }
        return tagged.count
    }

    /// The pending messages tagged `tag`, in arrival order.
    func ids(tagged tag: String) -> [MessageID] {
        tags.slots(tagged: tag).map { slots[Int($0)] }.sorted { $0.order < $1.order }.map(\.id)
    }

    /// Whether every pending message is held by a tag and none of them is in flight: nothing
    /// more can happen until a release (idle, for `waitUntilIdle`).
    var onlyHeldPending: Bool {
        guard heldCount == count else { return false }
        return tags.tagsBySlot.keys.allSatisfy { !slots[Int($0)].flags.contains(.inFlight) }
    }
}

/// The app's tags on pending messages (`send(…tags:)`) and the tags it holds (`hold(tagged:)`).
///
/// Only tagged messages have an entry, so an app that never tags pays one empty dictionary.
/// Keyed by slot index, as the projection's other side tables: `Projection.remove` clears a
/// slot's entry before the index is reused. The held set is the log's: every `held` record
/// not followed by a `released` one for its tag (the compactor re-appends it, see
/// `CourierCore.compact`).
struct TagTable {
    /// Each tagged pending message's tags, sorted.
    private(set) var tagsBySlot: [UInt32: [String]] = [:]
    /// The pending messages carrying each tag.
    private var slotsByTag: [String: Set<UInt32>] = [:]
    /// Tags held now.
    private(set) var held: Set<String> = []

    /// Slot `i` now holds a message with `tags` (none: nothing is kept).
    mutating func add(_ tags: [String], slot i: UInt32) {
        guard !tags.isEmpty else { return }
        assert(tagsBySlot[i] == nil, "a slot's tags are cleared when it is freed")
        tagsBySlot[i] = tags
        for tag in tags { slotsByTag[tag, default: []].insert(i) }
    }

    /// Slot `i`'s message left the projection.
    mutating func remove(slot i: UInt32) {
        guard let tags = tagsBySlot.removeValue(forKey: i) else { return }
        for tag in tags {
            slotsByTag[tag]?.remove(i)
            if slotsByTag[tag]?.isEmpty == true { slotsByTag[tag] = nil }
        }
    }

    /// The slots of the pending messages tagged `tag`, in no order.
    func slots(tagged tag: String) -> Set<UInt32> { slotsByTag[tag] ?? [] }

    /// Whether any of slot `i`'s tags is held.
    func isHeld(slot i: UInt32) -> Bool {
        guard !held.isEmpty, let tags = tagsBySlot[i] else { return false }
        return tags.contains { held.contains($0) }
    }

    /// Whether a message with `tags` would be held now.
    func isHeld(_ tags: [String]) -> Bool { !held.isEmpty && tags.contains { held.contains($0) } }

    /// Holds `tag`; false if it was held already.
    mutating func hold(_ tag: String) -> Bool { held.insert(tag).inserted }

    /// Releases `tag`; false if it was not held.
    mutating func release(_ tag: String) -> Bool { held.remove(tag) != nil }
}

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

    /// The pending messages a held tag keeps from delivery.
    var heldIDs: Set<MessageID> {
        guard heldCount > 0 else { return [] }
        return Set(tags.tagsBySlot.keys.map { slots[Int($0)] }.filter { $0.flags.contains(.heldByTag) }.map(\.id))
    }

    /// Whether every pending message is held by a tag and none of them is in flight: nothing
    /// more can happen until a release (idle, for `waitUntilIdle`).
    var onlyHeldPending: Bool {
        guard heldCount == count else { return false }
        return tags.tagsBySlot.keys.allSatisfy { !slots[Int($0)].flags.contains(.inFlight) }
    }
}

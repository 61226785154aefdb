import CourierLog

/// The due-time heap of `Projection` (4-byte slot indices only), and its self-check.
extension Projection {
    // MARK: Heap by (due, order)

    private func precedes(_ a: UInt32, _ b: UInt32) -> Bool {
        let x = slots[Int(a)], y = slots[Int(b)]
        return (x.dueMilliseconds, x.order) < (y.dueMilliseconds, y.order)
    }

    mutating func heapPush(_ i: UInt32) {
        assert(slots[Int(i)].heapIndex == Self.notInHeap)
        heap.append(i)
        slots[Int(i)].heapIndex = UInt32(heap.count - 1)
        siftUp(heap.count - 1)
    }

    mutating func heapRemove(_ i: UInt32) {
        let position = Int(slots[Int(i)].heapIndex)
        assert(position < heap.count && heap[position] == i)
        let last = heap.removeLast()
        slots[Int(i)].heapIndex = Self.notInHeap
        guard position < heap.count else { return }
        heap[position] = last
        slots[Int(last)].heapIndex = UInt32(position)
        siftDown(siftUp(position))
    }

    /// The slot's key changed: restore the heap order around it.
    mutating func heapFix(_ i: UInt32) {
        siftDown(siftUp(Int(slots[Int(i)].heapIndex)))
    }

    @discardableResult
    private mutating func siftUp(_ start: Int) -> Int {
        var c = start
        while c > 0 {
            let parent = (c - 1) / 2
            guard precedes(heap[c], heap[parent]) else { break }
            swapHeap(c, parent)
            c = parent
        }
        return c
    }

    private mutating func siftDown(_ start: Int) {
        var c = start
        while true {
            let l = 2 * c + 1, r = l + 1
            var m = c
            if l < heap.count && precedes(heap[l], heap[m]) { m = l }
            if r < heap.count && precedes(heap[r], heap[m]) { m = r }
            if m == c { return }
            swapHeap(c, m)
            c = m
        }
    }

    private mutating func swapHeap(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        slots[Int(heap[a])].heapIndex = UInt32(a)
        slots[Int(heap[b])].heapIndex = UInt32(b)
    }

    #if DEBUG
    /// The first invariant that does not hold, by name and slot, or nil. O(pending): debug
    /// builds run it after the core's writes (see `CourierCore.write`), tests after every step.
    func brokenInvariant() -> String? {
        var live = 0
        for (i, slot) in slots.enumerated() where slot.flags.contains(.live) {
            live += 1
            guard slotIndex(of: slot.id) == UInt32(i) else { return "the id index finds slot \(i) by its id" }
            let schedulable = slot.flags.isDisjoint(with: Flags.unschedulable) && isLaneHead(UInt32(i))
            guard slot.flags.contains(.heldByTag) == tags.isHeld(slot: UInt32(i)) else {
                return "slot \(i) is held by a tag exactly when one of its tags is held"
            }
            guard
                !slot.flags.contains(.parked) || origins.isDown(origin(ofSlot: UInt32(i)))
                    || origins.throttled.contains(origin(ofSlot: UInt32(i)))
            else {
                return "slot \(i) is parked only while its origin is down or throttled"
            }
            guard !slot.flags.contains(.sending) || slot.flags.contains(.inFlight) else {
                return "slot \(i) is sending only while in flight"
            }
            guard schedulable == (slot.heapIndex != Self.notInHeap) else {
                return "slot \(i) is in the heap exactly when schedulable (not in flight, parked or held; lane head)"
            }
        }
        // Each origin's counts of parked and sending slots are exact (its queue may hold stale
        // entries).
        var parked: [UInt32: Int] = [:], sending: [UInt32: Int] = [:]
        for (i, slot) in slots.enumerated() where slot.flags.contains(.live) {
            if slot.flags.contains(.parked) { parked[origin(ofSlot: UInt32(i)), default: 0] += 1 }
            if slot.flags.contains(.sending) { sending[origin(ofSlot: UInt32(i)), default: 0] += 1 }
        }
        for o in origins.entries.indices.map(UInt32.init) {
            if origins[o].parkedCount != parked[o, default: 0] {
                return "origin \(o) counts its parked slots exactly"
            }
            if origins[o].governor.sending != sending[o, default: 0] {
                return "origin \(o) counts its deliveries exactly"
            }
        }
        for (p, i) in heap.enumerated() {
            guard slots[Int(i)].heapIndex == UInt32(p) else { return "heap entry \(p) is recorded in its slot" }
            if p > 0 && precedes(i, heap[(p - 1) / 2]) { return "heap entry \(p) does not precede its parent" }
        }
        if idIndex.count != count { return "the id index holds \(idIndex.count) ids for \(count) live slots" }
        return live == count ? nil : "count (\(count)) is the number of live slots (\(live))"
    }
    #endif
}

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
        guard tags.held.insert(tag).inserted else { return tagged.count }  // held already
        // Bounded by the tagged messages.
        for i in tagged where !slots[Int(i)].flags.contains(.heldByTag) {
            if slots[Int(i)].flags.contains(.parked) { unparked(i) }
            if slots[Int(i)].heapIndex != Self.notInHeap { heapRemove(i) }
            slots[Int(i)].flags.insert(.heldByTag)
        }
        return tagged.count
    }

    /// Releases `tag`: its messages no other held tag keeps are scheduled again, at their own
    /// due times. Returns how many pending messages carry it.
    @discardableResult
    mutating func releaseTag(_ tag: String) -> Int {
        let tagged = tags.slots(tagged: tag)
        guard tags.held.remove(tag) != nil else { return tagged.count }  // not held
        // In arrival order, so messages due at the same time keep their order in the heap.
        let ordered = tagged.sorted { slots[Int($0)].order < slots[Int($1)].order }
        // Bounded by the tagged messages.
        for i in ordered where slots[Int(i)].flags.contains(.heldByTag) && !tags.isHeld(slot: i) {
            slots[Int(i)].flags.remove(.heldByTag)
            reschedule(i)
        }
        return tagged.count
    }

    /// The pending messages tagged `tag`, in arrival order.
    func ids(tagged tag: String) -> [MessageID] {
        tags.slots(tagged: tag).map { slots[Int($0)] }.sorted { $0.order < $1.order }.map(\.id)
    }

    /// The oldest pending message with one of `tags`, and that tag; none with a tag in `spared`,
    /// nor one of `ids`.
    func oldest(
        taggedWithOneOf tags: [String], sparing spared: Set<String> = [], or ids: Set<MessageID> = []
    ) -> (Slot, String)? {
        let oldestByTag = tags.compactMap { tag in
            self.tags.slots(tagged: tag).filter { i in
                !ids.contains(slots[Int(i)].id) && !(self.tags.tagsBySlot[i] ?? []).contains(where: spared.contains)
            }.map { slots[Int($0)] }.min { $0.order < $1.order }.map { ($0, tag) }
        }
        return oldestByTag.min { $0.0.order < $1.0.order }
    }

    /// Whether every pending message is held by a tag and none of them is in flight: nothing
    /// more can happen until a release (idle, for `waitUntilIdle`).
    var onlyHeldPending: Bool {
        guard tags.tagsBySlot.count == count else { return false }  // an untagged message is never held
        // Bounded by the pending messages, all tagged.
        return tags.tagsBySlot.keys.allSatisfy { i in
            slots[Int(i)].flags.contains(.heldByTag) && !slots[Int(i)].flags.contains(.inFlight)
        }
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
    var tagsBySlot: [UInt32: [String]] = [:]
    /// Tags held now.
    var held: Set<String> = []

    /// Slot `i` now holds a message with `tags` (none: nothing is kept).
    mutating func add(_ tags: [String], slot i: UInt32) {
        guard !tags.isEmpty else { return }
        assert(tagsBySlot[i] == nil, "a slot's tags are cleared when it is freed")
        tagsBySlot[i] = tags
    }

    /// The slots of the pending messages tagged `tag`, in no order (bounded by the tagged ones).
    func slots(tagged tag: String) -> [UInt32] { tagsBySlot.compactMap { $0.value.contains(tag) ? $0.key : nil } }

    /// Whether any of slot `i`'s tags is held.
    func isHeld(slot i: UInt32) -> Bool { tagsBySlot[i].map { isHeld($0) } ?? false }

    /// Whether a message with `tags` would be held now.
    func isHeld(_ tags: [String]) -> Bool { !held.isEmpty && tags.contains { held.contains($0) } }
}

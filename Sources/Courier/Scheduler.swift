/// The in-memory projection of the log that the engine schedules from: every pending
/// message's state, ordered by due time. Pure data, no I/O, no clock; callers hold the lock.
///
/// Replay rules (`apply`): the last full state (`enqueued` or `snapshot`) of an id wins; later
/// deltas (`attempted`) apply to it; `delivered`/`abandoned` end it; deltas for ids with no
/// full state are ignored. So a log cut at any record boundary, or compacted at any step,
/// replays to a consistent state that resurrects nothing delivered.
struct Scheduler {
    struct Entry {
        var state: MessageState
        /// Sequence number of the record holding the latest full state (for compaction).
        var fullStateSequence: UInt64
        /// Arrival order, for FIFO per destination and stable ties.
        var order: UInt64
        var inFlight = false
        /// Bumped on every reschedule; heap entries with an older version are stale.
        var version: UInt32 = 0
    }

    let fifoPerDestination: Bool
    private(set) var entries: [MessageID: Entry] = [:]
    private var heap = MinHeap()
    /// FIFO mode: ids per destination in arrival order; only the head is schedulable.
    private var queues: [String: ArrayQueue] = [:]
    private var nextOrder: UInt64 = 0

    init(fifoPerDestination: Bool) { self.fifoPerDestination = fifoPerDestination }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    // MARK: Replay

    enum Change: Equatable { case added, updated, ended, ignored }

    /// Applies one event read from the log (or just appended).
    @discardableResult
    mutating func apply(_ event: Event, sequence: UInt64) -> Change {
        switch event {
        case .enqueued(let state), .snapshot(let state):
            if entries[state.id] != nil {
                entries[state.id]!.state = state
                entries[state.id]!.fullStateSequence = sequence
                reschedule(state.id)
                return .updated
            }
            insert(state, sequence: sequence)
            return .added
        case .attempted(let id, let attempt, _, let due):
            guard entries[id] != nil else { return .ignored }
            entries[id]!.state.attempts = max(entries[id]!.state.attempts, attempt)
            entries[id]!.state.nextDueMilliseconds = due
            reschedule(id)
            return .updated
        case .delivered(let id, _, _), .abandoned(let id, _, _):
            guard entries[id] != nil else { return .ignored }
            remove(id)
            return .ended
        }
    }

    // MARK: Scheduling

    /// Takes the next message due at or before `nowMilliseconds` that is not in flight, and
    /// marks it in flight.
    mutating func takeDue(nowMilliseconds: UInt64) -> MessageState? {
        // Each turn pops one heap item: bounded by the heap's size.
        while let top = heap.peek() {
            guard let entry = entries[top.id], entry.version == top.version, !entry.inFlight else {
                heap.pop()  // stale: rescheduled, removed, or already taken
                continue
            }
            guard top.due <= nowMilliseconds else { return nil }
            heap.pop()
            entries[top.id]!.inFlight = true
            return entry.state
        }
        return nil
    }

    /// The earliest due time of a message not in flight, if any.
    mutating func earliestDue() -> UInt64? {
        while let top = heap.peek() {
            if let entry = entries[top.id], entry.version == top.version, !entry.inFlight { return top.due }
            heap.pop()
        }
        return nil
    }

    /// The earliest due time of a schedulable message, scanning past stale heap items
    /// without removing them (for read-only checks).
    var earliestDueWithoutMutation: UInt64? {
        entries.values.lazy.filter { !$0.inFlight && self.isSchedulable($0) }.map(\.state.nextDueMilliseconds).min()
    }

    private func isSchedulable(_ entry: Entry) -> Bool {
        !fifoPerDestination || queues[entry.state.url]?.first == entry.state.id
    }

    /// An attempt ended without resolving the message: record it and schedule the next one.
    mutating func retry(_ id: MessageID, attempts: UInt32, dueMilliseconds: UInt64) {
        guard entries[id] != nil else { return }
        entries[id]!.inFlight = false
        entries[id]!.state.attempts = attempts
        entries[id]!.state.nextDueMilliseconds = dueMilliseconds
        reschedule(id)
    }

    /// Keeps a message out of delivery, as if in flight, until `release` (used while its
    /// `.always` fsync is pending). It stays in the projection, so the compactor pins it.
    mutating func hold(_ id: MessageID) {
        entries[id]?.inFlight = true
    }

    /// An attempt was cancelled (close), or a hold ended: the message is schedulable again.
    mutating func release(_ id: MessageID) {
        guard entries[id] != nil else { return }
        entries[id]!.inFlight = false
        reschedule(id)
    }

    mutating func remove(_ id: MessageID) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        guard fifoPerDestination else { return }
        let key = entry.state.url
        queues[key]?.remove(id)
        if let head = queues[key]?.first, let e = entries[head] {
            heap.push(.init(due: e.state.nextDueMilliseconds, order: e.order, id: head, version: e.version))
        }
        if queues[key]?.isEmpty == true { queues[key] = nil }
    }

    /// Makes every message not in flight due at `now` at the latest; returns how many moved.
    mutating func makeDue(atOrBefore now: UInt64) -> Int {
        var moved = 0
        for (id, entry) in entries where !entry.inFlight && entry.state.nextDueMilliseconds > now {
            entries[id]!.state.nextDueMilliseconds = now
            reschedule(id)
            moved += 1
        }
        return moved
    }

    /// Pulls every due time after `limit` back to `limit` (after a wall-clock jump).
    mutating func clampDue(toAtMost limit: UInt64) {
        for (id, entry) in entries where entry.state.nextDueMilliseconds > limit {
            entries[id]!.state.nextDueMilliseconds = limit
            reschedule(id)
        }
    }

    /// Messages whose latest full state lies below `sequence` (the compactor re-snapshots
    /// them). In-flight ones too: their outcome will be a delta after the snapshot.
    func pinned(below sequence: UInt64) -> [MessageState] {
        entries.values.filter { $0.fullStateSequence < sequence }.sorted { $0.order < $1.order }.map(\.state)
    }

    /// Records that `id`'s full state now lives in record `sequence` (a snapshot).
    mutating func moveFullState(_ id: MessageID, to sequence: UInt64) {
        entries[id]?.fullStateSequence = sequence
    }

    /// The lowest full-state sequence of any pending message: the log may forget below it.
    var oldestFullStateSequence: UInt64? { entries.values.map(\.fullStateSequence).min() }

    private mutating func insert(_ state: MessageState, sequence: UInt64) {
        let order = nextOrder
        nextOrder += 1
        entries[state.id] = Entry(state: state, fullStateSequence: sequence, order: order)
        if fifoPerDestination {
            queues[state.url, default: ArrayQueue()].append(state.id)
            guard queues[state.url]?.first == state.id else { return }
        }
        heap.push(.init(due: state.nextDueMilliseconds, order: order, id: state.id, version: 0))
    }

    private mutating func reschedule(_ id: MessageID) {
        guard var entry = entries[id] else { return }
        entry.version &+= 1
        entries[id] = entry
        if fifoPerDestination && queues[entry.state.url]?.first != id { return }
        heap.push(.init(due: entry.state.nextDueMilliseconds, order: entry.order, id: id, version: entry.version))
    }
}

/// A binary min-heap of schedule items by (due, order).
struct MinHeap {
    struct Item {
        var due: UInt64
        var order: UInt64
        var id: MessageID
        var version: UInt32
        func precedes(_ other: Item) -> Bool { (due, order) < (other.due, other.order) }
    }

    private var items: [Item] = []
    var count: Int { items.count }
    func peek() -> Item? { items.first }

    mutating func push(_ item: Item) {
        items.append(item)
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[i].precedes(items[parent]) else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    @discardableResult
    mutating func pop() -> Item? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < items.count && items[l].precedes(items[m]) { m = l }
            if r < items.count && items[r].precedes(items[m]) { m = r }
            if m == i { break }
            items.swapAt(i, m)
            i = m
        }
        return top
    }
}

/// A FIFO of ids with O(1) amortised append and removal from the front.
struct ArrayQueue {
    private var items: [MessageID] = []
    private var head = 0
    var first: MessageID? { head < items.count ? items[head] : nil }
    var isEmpty: Bool { head >= items.count }

    mutating func append(_ id: MessageID) { items.append(id) }

    /// Removes `id`; usually the head (messages resolve in order), else a linear search.
    mutating func remove(_ id: MessageID) {
        if first == id {
            head += 1
        } else if let i = items[head...].firstIndex(of: id) {
            items.remove(at: i)
        }
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}

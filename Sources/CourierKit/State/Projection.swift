import CourierLog

/// The in-memory projection of the log that the engine schedules from: per pending message,
/// only what scheduling needs, in one 72-byte `Slot`. Bodies, headers and creation times stay
/// on disk; an attempt reads them back from the slot's `address`. Pure data, no I/O, no clock;
/// its owner (`CourierCore`) holds the lock.
///
/// Memory at N pending (ARCHITECTURE.md, "Memory"): 72 B per slot, 4 B in the heap, an entry
/// of the id index (a `Dictionary` from id to slot index), plus one entry per distinct URL (the
/// total, measured: <doc:MeasuredFigures>).
///
/// Replay rules (`apply`): the last full state (`enqueued` or `snapshot`) of an id wins; later
/// deltas (`attempted`) apply to it; `delivered`/`abandoned` end it; deltas for ids with no
/// full state are ignored. So a log cut at any record boundary, or compacted at any step,
/// replays to a consistent state that resurrects nothing delivered.
struct Projection {
    struct Slot {
        var id: MessageID
        /// Where the latest full state (`enqueued` or `snapshot`) lies in the log.
        var address: RecordAddress
        var dueMilliseconds: UInt64
        /// Arrival order: lanes, stable ties, `pendingMessages` order.
        var order: UInt64
        var attempts: UInt32
        /// Index into `urls`.
        var urlIndex: UInt32
        /// Index into `lanes`, or `LaneTable.none`: only a lane's head is schedulable.
        var lane: UInt32
        /// Position in `heap`, or `notInHeap` (in flight, held by a tag, parked, behind its lane's head, free).
        var heapIndex: UInt32
        var flags: Flags

        /// Gives `m`, the message's state as its record has it, the attempt count and due time the slot holds now.
        func stamp(_ m: inout MessageState) { (m.attempts, m.nextDueMilliseconds) = (attempts, dueMilliseconds) }
    }

    struct Flags: OptionSet {
        let rawValue: UInt8
        /// In use (a free slot waits in `freeSlots`).
        static let live = Flags(rawValue: 1)
        /// An attempt or a background upload is under way (`withhold`: an upload of an earlier
        /// process).
        static let inFlight = Flags(rawValue: 2)
        /// Due, but its destination is down or at its limit: waiting in the origin's parked
        /// queue, out of the heap.
        static let parked = Flags(rawValue: 4)
        /// Its due time may be a server's `Retry-After` (its last attempt was answered 429 or
        /// 503 with one): opening clamps it to `retryAfterLimit`, not `maximumDelay`.
        static let dueFromRetryAfter = Flags(rawValue: 8)
        /// In flight as a delivery of this process (not `withhold`'s: an earlier one's upload): counted in
        /// its origin's `sending`.
        static let sending = Flags(rawValue: 16)
        /// Its next attempt is a retry its destination's limit paces after a 429 or 503 (the
        /// server's pace bounds it): it takes no token of the retry budget.
        static let pacedRetry = Flags(rawValue: 32)
        /// One of its tags is held (`hold(tagged:)`): out of the heap and the parked queues
        /// until released. An attempt already under way finishes.
        static let heldByTag = Flags(rawValue: 64)
        /// Never in a batch with others (`Batching`): it has headers of its own, or a body that
        /// is not JSON.
        static let solo = Flags(rawValue: 128)

        /// What keeps a live slot out of the heap besides its lane.
        static let unschedulable: Flags = [.inFlight, .parked, .heldByTag]

        /// Live, and neither in flight, parked nor held by a tag: waiting for its due time (if its lane's head).
        var isWaiting: Bool { contains(.live) && isDisjoint(with: Self.unschedulable) }
    }

    static let notInHeap = UInt32.max

    let fifoPerDestination: Bool
    var slots: [Slot] = []
    private var freeSlots: [UInt32] = []
    /// Pending messages: the slots not free.
    var count: Int { slots.count - freeSlots.count }
    /// Each live slot's index, by its message's id.
    private(set) var idIndex: [MessageID: UInt32] = [:]
    /// A binary min-heap of slot indices by (due, order): exactly the schedulable slots.
    var heap: [UInt32] = []
    private(set) var urls = URLTable()
    /// The destinations: their governors and parked messages.
    var origins = OriginTable()
    /// Ordering keys (and, in FIFO mode, URLs): one queue per key.
    private(set) var lanes = LaneTable()
    /// The messages' tags and the tags held (`TagTable`, in `Projection+Index.swift`).
    var tags = TagTable()
    /// The replacement keys of pending messages (`send(…replacing:)`), as UTF-8 bytes (as
    /// `URLTable`'s URLs), both ways: at most one pending message holds a key.
    private var slotByReplacementKey: [[UInt8]: UInt32] = [:]
    private var replacementKeyBySlot: [UInt32: [UInt8]] = [:]
    private var nextOrder: UInt64 = 0
    /// The arrival order of the slot `applyFullState` added last.
    var lastAddedOrder: UInt64 { nextOrder - 1 }

    init(fifoPerDestination: Bool) { self.fifoPerDestination = fifoPerDestination }

    var isEmpty: Bool { count == 0 }

    func slotIndex(of id: MessageID) -> UInt32? { idIndex[id] }

    func slot(of id: MessageID) -> Slot? { slotIndex(of: id).map { slots[Int($0)] } }

    /// The URL a slot's message goes to.
    func url(of slot: Slot) -> String { urls.url(slot.urlIndex) }

    /// The pending message that message `id`, sent with `replacing: key`, withdraws: another
    /// one that holds the key.
    func replaced(by key: String?, id: MessageID) -> MessageID? {
        guard let key, let i = slotByReplacementKey[Array(key.utf8)], slots[Int(i)].id != id else { return nil }
        return slots[Int(i)].id
    }

    // MARK: Replay and appends

    /// A full state was logged at `address`: add the message, or replace what is known of it.
    /// Returns whether it was new.
    @discardableResult
    mutating func applyFullState(
        id: MessageID, url: String, orderingKey: String? = nil, tags: [String] = [], replacing: String? = nil,
        solo: Bool = false, attempts: UInt32, dueMilliseconds: UInt64, address: RecordAddress
    ) -> Bool {
        if let i = slotIndex(of: id) {
            slots[Int(i)].address = address
            slots[Int(i)].attempts = attempts
            // A snapshot keeps the due time, and in memory where it came from (the record
            // cannot say: after a reopen, a snapshotted wait counts as backoff).
            if slots[Int(i)].dueMilliseconds != dueMilliseconds { slots[Int(i)].flags.remove(.dueFromRetryAfter) }
            slots[Int(i)].dueMilliseconds = dueMilliseconds
            reschedule(i)
            return false
        }
        let urlIndex = urls.intern(url, origins: &origins)
        let slot = Slot(
            id: id, address: address, dueMilliseconds: dueMilliseconds, order: nextOrder, attempts: attempts,
            urlIndex: urlIndex, lane: LaneTable.none, heapIndex: Self.notInHeap,
            flags: solo ? [.live, .solo] : .live)
        nextOrder += 1
        let i = allocate(slot)
        idIndex[id] = i
        self.tags.add(tags, slot: i)  // none: nothing kept
        if let key = replacing.map({ Array($0.utf8) }) {
            // The key's holder until now, if any, is removed by the caller (`replaced(by:id:)`).
            slotByReplacementKey[key] = i
            replacementKeyBySlot[i] = key
        }
        if self.tags.isHeld(tags) { slots[Int(i)].flags.insert(.heldByTag) }  // none: false
        let key = LaneTable.key(orderingKey: orderingKey, url: urlIndex, fifoPerDestination: fifoPerDestination)
        if let key { slots[Int(i)].lane = lanes.join(i, key: key) }
        reschedule(i)  // into the heap (or parked) unless held, or behind its lane's head
        return true
    }

    /// An attempt was logged: its count, the next due time, and whether the answer carried a
    /// `Retry-After` the policy honours (429 or 503). Returns whether the message was pending.
    @discardableResult
    mutating func applyAttempt(id: MessageID, attempt: UInt32, dueMilliseconds: UInt64, retryAfter: Bool = false)
        -> Bool
    {
        guard let i = slotIndex(of: id) else { return false }
        slots[Int(i)].attempts = max(slots[Int(i)].attempts, attempt)
        slots[Int(i)].dueMilliseconds = dueMilliseconds
        slots[Int(i)].flags.remove(.dueFromRetryAfter)
        if retryAfter { slots[Int(i)].flags.insert(.dueFromRetryAfter) }
        reschedule(i)
        return true
    }

    /// A `delivered`, `abandoned` or `cancelled` record: the message is done. Returns whether it
    /// was pending.
    @discardableResult
    mutating func applyEnd(id: MessageID) -> Bool { remove(id) != nil }

    // MARK: Scheduling

    /// The earliest due time of a schedulable message, of a destination's next probe, or of
    /// the pace of a destination holding parked messages.
    var earliestDue: UInt64? {
        func earlier(_ a: UInt64?, _ b: UInt64?) -> UInt64? { a.map { min($0, b ?? $0) } ?? b }
        return earlier(heap.first.map { slots[Int($0)].dueMilliseconds }, origins.earliestStart)
    }

    /// An attempt ended without resolving the message: record it and schedule the next one.
    /// `paced`: that next attempt is a retry its destination's limit paces (after a 429 or 503
    /// from a destination answering others): it takes no token of the retry budget.
    mutating func retry(_ id: MessageID, attempts: UInt32, dueMilliseconds: UInt64, paced: Bool = false) {
        guard let i = slotIndex(of: id) else { return }
        slots[Int(i)].attempts = attempts
        slots[Int(i)].dueMilliseconds = dueMilliseconds
        if paced { slots[Int(i)].flags.insert(.pacedRetry) }
        release(id)  // rescheduled with them
    }

    /// Withholds a message from the engine, as in flight, until `release`: it is a background
    /// upload's (handed off in an earlier process, found at open or adopted from the session).
    /// It stays in the projection, so the compactor pins it.
    mutating func withhold(_ id: MessageID) {
        guard let i = slotIndex(of: id) else { return }
        // Out of the parked queue too (a down destination's), or it could go as a probe while
        // its upload runs; `release` parks it again if the destination is still down.
        if slots[Int(i)].flags.contains(.parked) { unparked(i) }
        slots[Int(i)].flags.insert(.inFlight)
        if slots[Int(i)].heapIndex != Self.notInHeap { heapRemove(i) }
    }

    /// An attempt was cancelled (close), or a withheld message is the engine's again: the
    /// message is schedulable again.
    mutating func release(_ id: MessageID) {
        guard let i = slotIndex(of: id) else { return }
        stopSending(i)
        slots[Int(i)].flags.remove(.inFlight)
        reschedule(i)
    }

    /// - Returns: the slot as it was, or nil if `id` was not pending.
    @discardableResult
    mutating func remove(_ id: MessageID) -> Slot? {
        guard let i = slotIndex(of: id) else { return nil }
        let slot = slots[Int(i)]
        if slot.heapIndex != Self.notInHeap { heapRemove(i) }
        stopSending(i)
        if slot.flags.contains(.parked) { unparked(i) }
        idIndex[id] = nil
        tags.tagsBySlot[i] = nil
        if let key = replacementKeyBySlot.removeValue(forKey: i), slotByReplacementKey[key] == i {
            slotByReplacementKey[key] = nil  // not if a later message holds it already
        }
        if slot.lane != LaneTable.none {
            lanes.leave(i, lane: slot.lane)
            // The lane's next message, if it was waiting behind this one, may be schedulable now.
            if let head = lanes.head(of: slot.lane), slots[Int(head)].heapIndex == Self.notInHeap { reschedule(head) }
        }
        urls.release(slot.urlIndex)
        slots[Int(i)].flags = []
        freeSlots.append(i)
        return slot
    }

    /// Pulls every due time after its limit back to it (after a wall-clock jump): `retryAfterLimit`
    /// for one that may be a server's `Retry-After`, else `backoffLimit`; with `waitingOnly`, of
    /// the messages neither in flight, parked nor held only.
    mutating func clampDue(
        backoffAtMost backoffLimit: UInt64, retryAfterAtMost retryAfterLimit: UInt64, waitingOnly: Bool = false
    ) {
        for i in slots.indices where waitingOnly ? slots[i].flags.isWaiting : slots[i].flags.contains(.live) {
            let limit = slots[i].flags.contains(.dueFromRetryAfter) ? retryAfterLimit : backoffLimit
            guard slots[i].dueMilliseconds > limit else { continue }
            slots[i].dueMilliseconds = limit
            // Sooner now: moved up in the heap at once, if it is there (O(log n) each).
            if slots[i].heapIndex != Self.notInHeap { heapFix(UInt32(i)) }
        }
        origins.probeNoLaterThan(max(backoffLimit, retryAfterLimit))
    }

    /// Live slots, in arrival order.
    func liveSlotsInOrder() -> [Slot] {
        slots.filter { $0.flags.contains(.live) }.sorted { $0.order < $1.order }
    }

    /// Messages whose latest full state lies below `sequence` (the compactor re-snapshots
    /// them), in slot order, not listed (weighing them makes no array). In-flight ones too:
    /// their outcome will be a delta after the snapshot.
    func pinned(below sequence: UInt64) -> LazyFilterSequence<[Slot]> {
        slots.lazy.filter { $0.flags.contains(.live) && $0.address.sequence < sequence }
    }

    /// Records that `id`'s full state now lives at `address` (a snapshot).
    mutating func moveFullState(_ id: MessageID, to address: RecordAddress) {
        if let i = slotIndex(of: id) { slots[Int(i)].address = address }
    }

    // MARK: Internals

    private mutating func allocate(_ slot: Slot) -> UInt32 {
        if let i = freeSlots.popLast() {
            slots[Int(i)] = slot
            return i
        }
        precondition(slots.count < Int(UInt32.max - 1), "more pending messages than a projection indexes")
        slots.append(slot)
        return UInt32(slots.count - 1)
    }

    /// Whether slot `i` is not held back by an earlier message of its lane.
    func isLaneHead(_ i: UInt32) -> Bool {
        let lane = slots[Int(i)].lane
        return lane == LaneTable.none || lanes.head(of: lane) == i
    }

    /// Puts a slot where its state says: in the heap if schedulable, parked if schedulable but
    /// its destination is down, else out of both.
    mutating func reschedule(_ i: UInt32) {
        let slot = slots[Int(i)]
        let inHeap = slot.heapIndex != Self.notInHeap
        let schedulable = slot.flags.isDisjoint(with: Flags.unschedulable) && isLaneHead(i)
        guard schedulable else {
            if inHeap { heapRemove(i) }
            return
        }
        if origins.isDown(origin(ofSlot: i)) {
            if inHeap { heapRemove(i) }
            park(i)
        } else if inHeap {
            heapFix(i)
        } else {
            heapPush(i)
        }
    }
}

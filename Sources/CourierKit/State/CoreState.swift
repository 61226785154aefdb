import CourierLog

/// Everything mutable of one courier, owned by its `CourierCore` and reached only through
/// `CourierCore.write` and `read`, under its one lock: the projection and what waits on it,
/// the engine's bookkeeping, background hand-off's mode and the lifecycle wiring. One owner,
/// as GRDB's `SerializedDatabase` owns its connection: no second lock, and no lock order.
struct CoreState {
    var projection: Projection
    var resolved: ResolvedMemory
    /// What `NextDue` decides outcomes by (`Configuration.retry`).
    var retry = RetryPolicy()
    var callbacks: [MessageID: Callbacks] = [:]
    /// `.always`: pending messages a send withdraws (replaced, or dropped at the bound) while its
    /// record waits for its fsync (`Effects.withdrawals`). **Already gone for every decision**:
    /// no other send drops or counts them, no snapshot keeps them, no outcome of theirs counts.
    var withdrawing: Set<MessageID> = []
    /// Tasks in `delivered(_:)`, by message and then by key (so a cancelled wait removes its own).
    var waiters: [MessageID: [ObjectIdentifier: DeliveryWaiter]] = [:]
    /// Waiters for "nothing pending", by key (so a cancelled wait can remove its own).
    var idleWaiters: [ObjectIdentifier: IdleWaiter] = [:]
    var subscribers: [ObjectIdentifier: EventBuffer] = [:]
    /// The latest wall time (ms since 1970) the engine and `send` have read: what the log stamps
    /// records with, so it never calls the app's clock under the core's lock.
    var wallMilliseconds: UInt64 = 0
    /// Critical sections so far, reads included: what tests count the core's lock acquisitions
    /// by, and (debug builds) how often the projection checks itself. One add per section.
    var criticalSections: UInt64 = 0
    /// Messages delivered since open (for `deliverPending`'s summary).
    var deliveredCount = 0
    /// What opening found wrong, if anything: the first event of every `events()` stream.
    var openingDamage: CourierError?
    var compaction = CompactionState()
    /// Pending messages' full states as sent, so an attempt need not read the log.
    var recent = RecentStates(capacity: 4096)
    /// Messages handed to a background upload session, by id (each is in flight in the
    /// projection until its task's completion is heard).
    var handOffs: [MessageID: HandOff] = [:]
    /// What ends a hand-off whose message ended (cancels its task, removes its body file): given
    /// to the effects of a section that ended one, which run it after the lock, with the rest.
    var endHandOff: (@Sendable (MessageID, HandOff) -> Void)?
    /// Messages taken for hand-off whose task is being made (counted against the bound).
    var handOffsStarting = 0
    /// Messages a hand-off may not take in this process (a 401 sent them back to the
    /// foreground, where `prepareRequest` makes fresh credentials).
    var foregroundOnly: Set<MessageID> = []

    // The engine and the hand-off: one mode, one scheduler, the same owner, the same lock.
    /// The delivery mode, the attempts and hand-off passes under way, the timer, settle waiters.
    var scheduler = SchedulerState()
    /// Reconciling the log with the background session's tasks (started by `init` when
    /// background uploads are on): the engine (`DeliveryMode.Phase.reconciling`) and completions
    /// start after it.
    var reconciliation: Task<Void, Never>?
    /// The app-lifecycle wiring, if the app enabled it (iOS: `open(…, lifecycle: .automatic)`).
    var lifecycle: (any PlatformIntegration)?
    /// How plans start their tasks (given once by the facade: `CourierCore.install`).
    var launcher: Launcher?

    /// `close()` was called.
    var closed: Bool { scheduler.mode.phase == .closed }
}

#if DEBUG
extension CoreState {
    /// The first invariant that does not hold, by name, or nil: the projection's own, then
    /// those of the state around it. O(pending + hand-offs): debug builds run it after the
    /// core's writes (see `CourierCore.write`).
    func brokenInvariant() -> String? {
        if let broken = projection.brokenInvariant() { return broken }
        guard handOffsStarting >= 0 else { return "\(handOffsStarting) hand-offs starting" }
        // A handed-off message is the session's: pending, and in flight so the engine never
        // takes it too. Bounded by the hand-offs (at most `maximumOutstandingTasks`).
        for id in handOffs.keys {
            guard let slot = projection.slot(of: id) else { return "hand-off \(id) names no pending message" }
            guard slot.flags.contains(.inFlight) else { return "hand-off \(id) is not in flight" }
        }
        // Messages are taken for hand-off in the critical section that makes their pass.
        guard handOffsStarting == 0 || !scheduler.passes.isEmpty else {
            return "\(handOffsStarting) hand-offs starting and no pass under way"
        }
        let mode = scheduler.mode
        guard mode.stopping >= 0, mode.forcedRuns >= 0 else {
            return "mode counts below zero: \(mode.stopping) stopping, \(mode.forcedRuns) forced runs"
        }
        return nil
    }
}
#endif

/// The full states of recently sent messages, so that an attempt finds its message here
/// instead of reading it back from the log (a thread hop and a positioned read each, a visible
/// share of delivery throughput: <doc:MeasuredFigures>). The record on disk stays the truth;
/// this is only a shortcut.
///
/// A ring indexed by the message's arrival order in the projection (`Projection.Slot.order`,
/// which `send` assigns in the same critical section as the insert): an insert overwrites one
/// entry, a lookup reads one, no hashing and no scan. An entry is valid only if its id matches
/// (a later message may have taken the place). A message resolved is dropped at once, so the
/// ring holds pending messages only: a backlog of up to `capacity` is attempted without a read.
struct RecentStates {
    /// Bodies larger than this are not kept: the ring's bodies never exceed capacity × this
    /// (4 MiB at the default capacity), and only while those messages are pending.
    static let maximumBodyBytes = 1024
    private var ring: [MessageState?]

    init(capacity: Int) { ring = Array(repeating: nil, count: max(1, capacity)) }

    private func index(_ order: UInt64) -> Int { Int(order % UInt64(ring.count)) }

    /// The state of message `id`, whose slot has arrival order `order`, if the ring holds it.
    subscript(id: MessageID, order order: UInt64) -> MessageState? {
        guard let state = ring[index(order)], state.id == id else { return nil }
        return state
    }

    mutating func insert(_ state: MessageState, order: UInt64) {
        guard state.body.count <= Self.maximumBodyBytes else { return }
        ring[index(order)] = state
    }

    /// Message `id` is resolved: its entry goes (if it is still there).
    mutating func remove(_ id: MessageID, order: UInt64) {
        if ring[index(order)]?.id == id { ring[index(order)] = nil }
    }
}

extension CoreState {
    /// Message `id`'s full state if it is among the recently sent (no file work), with the
    /// attempt count and due time the projection holds; nil if it is not pending or not kept.
    func recentState(of id: MessageID) -> MessageState? {
        guard let slot = projection.slot(of: id), var message = recent[id, order: slot.order] else { return nil }
        slot.stamp(&message)
        return message
    }
}

/// How a message's life ended.
enum Resolution: Equatable {
    /// With the answer's status, and where its `delivered` record lies (nil until appended, or if
    /// the append failed): `delivered(_:)` reads the rest of the answer back from there.
    case delivered(status: UInt16, address: RecordAddress? = nil)
    case abandoned(AbandonReason)
    /// Abandoned before this run opened the log, which keeps the reason as its text.
    case abandonedEarlier(reason: String)
    case cancelled
}

/// The most recent resolutions, for `delivered(_:)` on messages already done. Bounded: the
/// oldest are forgotten first.
struct ResolvedMemory {
    let limit: Int
    private var map: [MessageID: Resolution] = [:]
    /// The ids `map` holds, oldest first.
    private var order = FIFOQueue<MessageID>()

    init(limit: Int) { self.limit = max(0, limit) }

    subscript(id: MessageID) -> Resolution? { map[id] }

    /// Message `id`'s `delivered` record was appended at `address`.
    mutating func locate(_ id: MessageID, at address: RecordAddress) {
        if case .delivered(let status, nil)? = map[id] { map[id] = .delivered(status: status, address: address) }
    }

    mutating func record(_ id: MessageID, _ resolution: Resolution) {
        guard limit > 0 else { return }
        if map.updateValue(resolution, forKey: id) == nil { order.append(id) }
        // Evict one per insert past the limit: bounded work per call.
        if map.count > limit, let oldest = order.popFirst() { map[oldest] = nil }
    }
}

/// A task waiting for the courier to be idle: nothing pending, or (`exceptHandedOff`, for
/// `deliverPending(within:)`) nothing pending but what the background session has.
struct IdleWaiter {
    var continuation: CheckedContinuation<Void, Never>
    var exceptHandedOff: Bool
}

/// A waiting call's key (`CoreInput.waitForDelivery`, `waitUntilIdle`): the identity of an
/// object the call keeps alive while it waits.
final class WaitKey: Sendable {
    var id: ObjectIdentifier { ObjectIdentifier(self) }
}

/// Everyone who waits on the core: delivery waiters, idle waiters, settle waiters, event
/// subscribers (their waits begin and end in `handle`).
extension CoreState {
    /// What a task in `delivered(_:)` learns of message `id`, resolved as `resolution` (nil: not
    /// remembered): nil if it was delivered, else why not.
    static func waiterError(_ resolution: Resolution?, of id: MessageID) -> CourierError? {
        switch resolution {
        case .delivered: nil
        case .abandoned(let reason): CourierError(.abandoned, reason.description)
        case .abandonedEarlier(let reason): CourierError(.abandoned, reason)
        case .cancelled: CourierError(.cancelled, "message \(id) was cancelled")
        case nil: CourierError(.unknownMessage, "no message \(id) is pending or recently resolved")
        }
    }

    /// What a task in `delivered(_:)` is resumed with: the answer's status, or why not delivered.
    static func waiterResult(_ resolution: Resolution?, of id: MessageID) -> Result<UInt16, any Error> {
        if case .delivered(let status, _)? = resolution { return .success(status) }
        return .failure(waiterError(resolution, of: id) ?? CourierError(.unknownMessage, "message \(id)"))
    }

    /// `close()` ended: every waiter is released, every stream finished.
    mutating func releaseEveryone(_ effects: inout Effects) {
        for (_, waiters) in waiters {
            effects.answered += waiters.values.map { ($0, .failure(CourierError(.closed, "the courier was closed"))) }
        }
        waiters.removeAll()
        effects.idle = idleWaiters.values.map(\.continuation) + scheduler.settleWaiters
        idleWaiters.removeAll()
        scheduler.settleWaiters.removeAll()
        effects.finishStreams = Array(subscribers.values)
        subscribers.removeAll()
    }

    /// Whether nothing can happen until the app acts: no message pending but those a held
    /// tag keeps (none of them in flight), and with `exceptHandedOff`, those the background
    /// session has.
    func isIdle(exceptHandedOff: Bool) -> Bool {
        if projection.isEmpty || projection.onlyHeldPending { return true }
        guard exceptHandedOff, handOffsStarting == 0 else { return false }
        if projection.count == handOffs.count { return true }
        // Only a tagged message can be held.
        guard projection.count <= handOffs.count + projection.tags.tagsBySlot.count else { return false }
        // Bounded by the pending messages.
        return projection.liveSlotsInOrder().allSatisfy { slot in
            handOffs[slot.id] != nil || (slot.flags.contains(.heldByTag) && !slot.flags.contains(.inFlight))
        }
    }

    /// The idle waiters that are idle now are told (`IdleWaiter`).
    mutating func tellIdleWaiters(_ effects: inout Effects) {
        guard !idleWaiters.isEmpty else { return }
        let idle = isIdle(exceptHandedOff: false)
        guard idle || isIdle(exceptHandedOff: true) else { return }
        // Bounded by the waiters (a few tasks).
        for (key, waiter) in idleWaiters where idle || waiter.exceptHandedOff {
            effects.idle.append(waiter.continuation)
            idleWaiters[key] = nil
        }
    }
}

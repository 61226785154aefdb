/// Everyone who waits on the core: delivery waiters, idle waiters, event subscribers.
extension CourierCore {
    /// Registers `continuation` under `key` to be resumed when `id` resolves, or returns at
    /// once what is already known (or that the waiting task is already `cancelled`).
    func waitForResolution(
        of id: MessageID, key: Int, _ continuation: DeliveryWaiter,
        cancelled: () -> Bool
    ) -> Result<Void, any Error>? {
        write { state, _ -> Result<Void, any Error>? in
            if state.projection.slotIndex(of: id) != nil {
                guard !state.closed else { return .failure(CourierError(.closed, "the courier is closed")) }
                guard !cancelled() else { return .failure(CancellationError()) }
                state.waiters[id, default: [:]][key] = continuation
                return nil
            }
            switch state.resolved[id] {
            case .delivered: return .success(())
            case .abandoned(let reason): return .failure(CourierError(.abandoned, reason.description))
            case .abandonedEarlier(let reason): return .failure(CourierError(.abandoned, reason))
            case .cancelled: return .failure(CourierError(.cancelled, "message \(id) was cancelled"))
            case nil: return .failure(CourierError(.unknownMessage, "no message \(id) is pending or recently resolved"))
            }
        }.0
    }

    /// Removes the waiter of `id` under `key`, if it is still waiting (its task was cancelled).
    func removeWaiter(of id: MessageID, key: Int) -> DeliveryWaiter? {
        write { state, _ -> DeliveryWaiter? in
            let waiter = state.waiters[id]?.removeValue(forKey: key)
            if state.waiters[id]?.isEmpty == true { state.waiters[id] = nil }
            return waiter
        }.0
    }

    /// A fresh key for an idle or delivery waiter.
    func makeWaiterKey() -> Int {
        write { state, _ in
            defer { state.nextWaiterKey += 1 }
            return state.nextWaiterKey
        }.0
    }

    /// Registers an idle waiter under `key`; false (not registered) if it is idle already (see
    /// `IdleWaiter`), the core is closed or `cancelled` says so: resume it at once.
    func addIdleWaiter(
        _ key: Int, _ continuation: CheckedContinuation<Void, Never>, exceptHandedOff: Bool = false,
        cancelled: () -> Bool
    ) -> Bool {
        write { state, _ -> Bool in
            let idle = Self.isIdle(state, exceptHandedOff: exceptHandedOff)
            if idle || state.closed || cancelled() { return false }
            state.idleWaiters[key] = IdleWaiter(continuation: continuation, exceptHandedOff: exceptHandedOff)
            return true
        }.0
    }

    func removeIdleWaiter(_ key: Int) -> CheckedContinuation<Void, Never>? {
        write { state, _ in state.idleWaiters.removeValue(forKey: key)?.continuation }.0
    }

    /// Whether nothing can happen until the app acts: no message pending but those a held
    /// tag keeps (none of them in flight), and with `exceptHandedOff`, those the background
    /// session has.
    static func isIdle(_ state: CoreState, exceptHandedOff: Bool) -> Bool {
        let projection = state.projection
        if projection.isEmpty || projection.onlyHeldPending { return true }
        guard exceptHandedOff, state.handOffsStarting == 0 else { return false }
        if projection.count == state.handOffs.count { return true }
        guard projection.count <= state.handOffs.count + projection.heldCount else { return false }
        // Bounded by the pending messages.
        return projection.liveSlotsInOrder().allSatisfy { slot in
            state.handOffs[slot.id] != nil
                || (slot.flags.contains(.heldByTag) && !slot.flags.contains(.inFlight))
        }
    }

    /// Under the lock: the idle waiters that are idle now are told (`IdleWaiter`).
    static func tellIdleWaiters(_ state: inout CoreState, _ effects: inout Effects) {
        guard !state.idleWaiters.isEmpty else { return }
        let idle = isIdle(state, exceptHandedOff: false)
        guard idle || isIdle(state, exceptHandedOff: true) else { return }
        // Bounded by the waiters (a few tasks).
        for (key, waiter) in state.idleWaiters where idle || waiter.exceptHandedOff {
            effects.idle.append(waiter.continuation)
            state.idleWaiters[key] = nil
        }
    }

    /// Adds a subscriber (a nil key if closed), with the pending messages' ids in arrival order
    /// if `pendingIDs` (the same critical section: no event about them is missed or seen twice).
    /// Yields the opening damage first (yielding only buffers, so it is safe under the lock, and
    /// it orders this event before any later one).
    func subscribe(_ continuation: EventBuffer, pendingIDs: Bool = false) -> (key: Int?, pending: [MessageID]) {
        write { state, _ -> (Int?, [MessageID]) in
            let pending = pendingIDs ? state.projection.liveSlotsInOrder().map(\.id) : []
            guard !state.closed else { return (nil, pending) }
            if let damage = state.openingDamage { continuation.yield(.storageFailed(damage)) }
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = continuation
            return (state.nextSubscriber, pending)
        }.0
    }

    func unsubscribe(_ key: Int) {
        _ = write { state, _ in state.subscribers.removeValue(forKey: key) }
    }
}

extension CourierCore {
    /// What tests and `courier-bench` read of the core's bookkeeping: one read of the lock, so
    /// nothing outside `State/` reaches into `CoreState` (`make format-check`, Tests included).
    struct Diagnostics {
        /// Critical sections so far, this read included.
        var criticalSections: UInt64
        var attemptsUnderWay: Int
        /// Messages taken for a delivery (an attempt or an upload) and not yet ended.
        var sending: Int
        /// Tasks in `delivered(_:)` and idle waiters.
        var waiters: Int
        /// How often an outcome looked for a compaction worth running.
        var compactionChecks: Int
        var compacting: Bool
        var hasLifecycle: Bool
    }

    /// Emits `.storageFailed(error)` to every subscriber, in order with everything else the core
    /// emits: `DurabilityTableTests` marks moments in the event stream with it.
    func report(_ error: CourierError) -> Effects {
        write { _, effects in effects.emit(.storageFailed(error)) }.1
    }

    var diagnostics: Diagnostics {
        read { state in
            Diagnostics(
                criticalSections: state.criticalSections, attemptsUnderWay: state.scheduler.attempts.count,
                sending: state.projection.slots.lazy.filter { $0.flags.contains(.sending) }.count,
                waiters: state.idleWaiters.count + state.waiters.values.map(\.count).reduce(0, +),
                compactionChecks: state.compaction.checks, compacting: state.compaction.compacting,
                hasLifecycle: state.lifecycle != nil)
        }
    }
}

/// Everyone who waits on the core: delivery waiters, idle waiters, settle waiters, event
/// subscribers. A waiting call names itself by a key of its own (an object it keeps alive while
/// it waits), so a cancelled wait removes just its own.
extension CoreState {
    mutating func wait(_ input: CoreInput, at instant: EngineInstant?, _ effects: inout Effects) {
        switch input {
        case .waitForDelivery(let id, let key, let waiter, let cancelled):
            if projection.slotIndex(of: id) != nil {
                if closed {
                    effects.failures.append((waiter, CourierError(.closed, "the courier is closed")))
                } else if cancelled() {
                    effects.failures.append((waiter, CancellationError()))
                } else {
                    waiters[id, default: [:]][key] = waiter
                }
                return
            }
            switch resolved[id] {
            case .delivered: effects.successes.append(waiter)
            case .abandoned(let reason): effects.failures.append((waiter, CourierError(.abandoned, reason.description)))
            case .abandonedEarlier(let reason): effects.failures.append((waiter, CourierError(.abandoned, reason)))
            case .cancelled: effects.failures.append((waiter, CourierError(.cancelled, "message \(id) was cancelled")))
            case nil:
                let error = CourierError(.unknownMessage, "no message \(id) is pending or recently resolved")
                effects.failures.append((waiter, error))
            }
        case .waitUntilIdle(let key, let waiter, let cancelled):
            if isIdle(exceptHandedOff: waiter.exceptHandedOff) || closed || cancelled() {
                effects.idle.append(waiter.continuation)
            } else {
                idleWaiters[key] = waiter
            }
        case .stopWaiting(let key, let id?):
            if let waiter = waiters[id]?.removeValue(forKey: key) {
                effects.failures.append((waiter, CancellationError()))
            }
            if waiters[id]?.isEmpty == true { waiters[id] = nil }
        case .stopWaiting(let key, nil):
            if let waiter = idleWaiters.removeValue(forKey: key) { effects.idle.append(waiter.continuation) }
        case .settle(let continuation):
            if let instant, !Scheduler.isSettled(self, at: instant) {
                scheduler.settleWaiters.append(continuation)
            } else {
                effects.idle.append(continuation)
            }
        case .subscribe(let buffer, let pendingIDs):
            if pendingIDs { effects.reply.pendingIDs = projection.liveSlotsInOrder().map(\.id) }
            guard !closed else { return effects.finishStreams.append(buffer) }
            if let damage = openingDamage { buffer.yield(.storageFailed(damage)) }
            subscribers[ObjectIdentifier(buffer)] = buffer
        case .unsubscribe(let key): subscribers[key] = nil
        default: preconditionFailure("not a wait: \(input)")
        }
    }

    /// `close()` ended: every waiter is released, every stream finished.
    mutating func releaseEveryone(_ effects: inout Effects) {
        for (_, waiters) in waiters {
            effects.failures += waiters.values.map { ($0, CourierError(.closed, "the courier was closed")) }
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
        guard projection.count <= handOffs.count + projection.heldCount else { return false }
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

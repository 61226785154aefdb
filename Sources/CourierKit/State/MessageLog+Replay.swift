import CourierLog
import Foundation

/// Rebuilds the core's state from the log while it opens: the log visits every valid record
/// in the same pass that recovers its newest segment, so no segment is read twice, and each
/// record is decoded by the one parser (`Event.decode`). Damage is never silent: `makeCore` reports it,
/// `recovery` holds it and every `events()` stream begins with a `.storageFailed` naming it.
final class Replayer {
    private var projection: Projection
    private var resolved: ResolvedMemory
    private var undecodable: [RecordAddress] = []
    /// Hand-offs not yet closed by an `attempted` or end record.
    private var handOffs: [MessageID: HandOff] = [:]

    init(configuration: Courier.Configuration) {
        projection = Projection(fifoPerDestination: configuration.deliveryOrder == .fifoPerDestination)
        projection.origins.rules = Governor.Rules(
            concurrency: configuration.concurrencyLimit, maximumConcurrency: configuration.maximumConcurrentDeliveries,
            backoff: configuration.destinationBackoff, budget: configuration.retryBudget, retry: configuration.retry)
        projection.origins.batching = configuration.batchingByOrigin
        resolved = ResolvedMemory(limit: configuration.resolvedMemoryCount)
    }

    func visit(_ record: RecordView) {
        switch Event.decode(kind: record.kind, body: record.body) {
        case .enqueued(let s)?, .snapshot(let s)?:
            let replaced = projection.replaced(by: s.replacing, id: s.id)
            projection.applyFullState(
                id: s.id, url: s.url, orderingKey: s.orderingKey, tags: s.tags, replacing: s.replacing,
                solo: !s.isBatchable, attempts: s.attempts, dueMilliseconds: s.nextDueMilliseconds,
                address: record.address)
            if let replaced { end(replaced, .cancelled) }  // withdrawn by this record
        case .attempted(let id, let attempt, let outcome, let due)?:
            projection.applyAttempt(
                id: id, attempt: attempt, dueMilliseconds: due, retryAfter: outcome.carriesRetryAfter)
            if !handOffs.isEmpty { handOffs[id] = nil }
        case .delivered(let id, _, let status, _, _)?: end(id, .delivered(status: status, address: record.address))
        case .abandoned(let id, _, let reason)?: end(id, .abandonedEarlier(reason: reason))
        case .cancelled(let id)?: end(id, .cancelled)
        case .handedOff(let id, let task)?:
            if projection.slotIndex(of: id) != nil { handOffs[id] = task }
        case .held(let tag)?:
            projection.holdTag(tag)
        case .released(let tag)?:
            projection.releaseTag(tag)
        case nil:
            undecodable.append(record.address)
        }
    }

    /// Message `id`'s end record: it resolves (if it was pending: `resolution`, made only then)
    /// and its hand-off, if any, is over.
    private func end(_ id: MessageID, _ resolution: @autoclosure () -> Resolution) {
        if projection.applyEnd(id: id) { resolved.record(id, resolution()) }
        if !handOffs.isEmpty { handOffs[id] = nil }
    }

    /// The core of the replayed state, and what opening found: the log's recovery plus what
    /// replay found. A function of its own so that the state's other references, the bindings
    /// below, are gone when the core is returned: the core must hold the only reference to the
    /// projection's buffers, or its first change would copy them all. Scoping does what a
    /// `consume` did, which the iOS type-check's compiler crashed on (`make ios-check`).
    func makeCore(
        _ log: MessageLog, configuration: Courier.Configuration, nowMilliseconds now: UInt64,
        endHandOff: @escaping @Sendable (MessageID, HandOff) -> Void
    ) -> (CourierCore, RecoveryReport) {
        // Moved out, not copied (as above).
        var taken = Projection(fifoPerDestination: projection.fifoPerDestination)
        swap(&taken, &projection)
        // No message waits longer than the current policy allows (the one rule, `NextDue`).
        let limits = NextDue.limitsAtOpen(policy: configuration.retry, nowMilliseconds: now)
        taken.clampDue(backoffAtMost: limits.backoff, retryAfterAtMost: limits.retryAfter)
        #if DEBUG
        if let broken = taken.brokenInvariant() {
            assertionFailure("projection invariant broken after replay: \(broken)")
        }
        #endif
        var report = log.recovery
        if let replay = log.openingReplay { report.absorb(replay) }
        report.undecodableRecords = undecodable
        // A message handed off when the log was last written is in the session's hands until
        // reconciliation (`Courier.reconcileHandOffs`) finds its task or not.
        for id in handOffs.keys { taken.withhold(id) }
        // The damage's text only when there is damage: a clean open builds no summary.
        let damage =
            report.isClean
            ? nil
            : CourierError(
                .storageFailed,
                "opening the log found damage; messages may be missing (see Courier.recovery): \(report.summary)")
        let state = CoreState(
            projection: taken, resolved: resolved, retry: configuration.retry, wallMilliseconds: now,
            openingDamage: damage, handOffs: handOffs, endHandOff: endHandOff)
        let core = CourierCore(log: log, limits: configuration.coreLimits, state: state, logger: configuration.logger)
        return (core, report)
    }
}

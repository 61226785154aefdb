import CourierLog

extension Courier {
    /// Rebuilds the outbox state from the log and returns it with what opening found: the
    /// log's recovery plus the damage and undecodable records met on the way. Damage is never
    /// silent: `recovery` holds it and every `events` stream begins with a `.storageFailed`
    /// naming it.
    static func replay(_ log: WriteAheadLog, configuration: Configuration,
                       nowMilliseconds now: UInt64) throws -> (Outbox.State, RecoveryReport) {
        var projection = Projection(fifoPerDestination: configuration.deliveryOrder == .fifoPerDestination)
        var resolved = ResolvedMemory(limit: configuration.resolvedMemoryCount)
        var undecodable: [RecordLocation] = []
        // The smallest record of a message is about 100 bytes: no more slots than that. (Only
        // the pages used become resident.)
        projection.reserve(min(log.sizeBytes / 100, 1 << 26))
        // One pass over the log; each record is read in place (see `ReplayFact`).
        let replayReport = try log.replayViews { record in
            switch Event.replayFact(kind: record.kind, body: record.body) {
            case .fullState(let id, let url, let attempts, let due)?:
                projection.applyFullState(id: id, url: url, attempts: attempts, dueMilliseconds: due, address: record.address)
            case .attempted(let id, let attempt, let due)?:
                projection.applyAttempt(id: id, attempt: attempt, dueMilliseconds: due)
            case .delivered(let id)?:
                if projection.applyEnd(id: id) == .ended { resolved.record(id, .delivered) }
            case .abandoned(let id, let reason)?:
                if projection.applyEnd(id: id) == .ended { resolved.record(id, .abandoned(reason)) }
            case nil:
                undecodable.append(record.location)
            }
        }
        // A due time far in the future can only come from a wall clock that went backwards
        // since it was written: bring it within one maximum delay of now.
        let limit = now + UInt64(max(configuration.retry.maximumDelay, configuration.retry.retryAfterLimit).seconds * 1000)
        projection.clampDue(toAtMost: limit)
        var report = log.recovery
        report.absorb(replayReport)
        report.undecodableRecords = undecodable
        var state = Outbox.State(projection: projection, resolved: resolved)
        if !report.isClean {
            state.openingDamage = "opening the log found damage; messages may be missing (see Courier.recovery): \(report.summary)"
        }
        return (state, report)
    }
}

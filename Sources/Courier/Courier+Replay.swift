import CourierLog

extension Courier {
    /// Rebuilds the projection in `core` from the log and returns what opening found: the
    /// log's recovery plus the damage and undecodable records met on the way. Damage is never
    /// silent: `recovery` holds it and every `events` stream begins with a `.storageFailed`
    /// naming it.
    static func replay(_ log: WriteAheadLog, into core: inout Core, configuration: Configuration,
                       nowMilliseconds now: UInt64) throws -> RecoveryReport {
        var scheduler = core.scheduler
        var resolved = core.resolved
        var undecodable: [RecordLocation] = []
        let replayReport = try log.replay { record in
            guard let event = Event.decode(kind: record.kind, body: record.body) else {
                undecodable.append(record.location)
                return
            }
            if scheduler.apply(event, sequence: record.sequence) == .ended {
                if case .abandoned(let id, _, let reason) = event { resolved.record(id, .abandoned(reason)) }
                if case .delivered(let id, _, _) = event { resolved.record(id, .delivered) }
            }
        }
        // A due time far in the future can only come from a wall clock that went backwards
        // since it was written: bring it within one maximum delay of now.
        let limit = now + UInt64(max(configuration.retry.maximumDelay, configuration.retry.retryAfterLimit).seconds * 1000)
        scheduler.clampDue(toAtMost: limit)
        core.scheduler = scheduler
        core.resolved = resolved
        var report = log.recovery
        report.absorb(replayReport)
        report.undecodableRecords = undecodable
        if !report.isClean {
            core.openingDamage = "opening the log found damage; messages may be missing (see Courier.recovery): \(report.summary)"
        }
        return report
    }
}

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
        let replayReport = try log.replay { record in
            guard let event = Event.decode(kind: record.kind, body: record.body) else {
                undecodable.append(record.location)
                return
            }
            let address = RecordAddress(sequence: record.sequence, offset: UInt32(record.location.offset),
                                        length: UInt32(record.location.length))
            if projection.apply(event, address: address) == .ended {
                if case .abandoned(let id, _, let reason) = event { resolved.record(id, .abandoned(reason)) }
                if case .delivered(let id, _, _) = event { resolved.record(id, .delivered) }
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

import CourierLog

/// The core's intents for tags: `hold(tagged:)`, `release(tagged:)`, `cancel(tagged:)`. Each is
/// one critical section that logs first and then changes the projection, so log order is
/// projection order, as for every state change (replay: `Replayer.visit`).
extension CourierCore {
    /// `hold(tagged:)`: logs a `held` record (once per hold: holding a held tag logs nothing)
    /// and takes the tag's messages out of the schedule. Returns how many pending messages carry
    /// the tag, and the effects (a waiter may now be idle: only held messages are left).
    func holdTag(_ tag: String) -> (Int, Effects) {
        write { state, effects -> Int in
            guard !state.closed else { return 0 }
            if !state.projection.tags.held.contains(tag) { append(.held(tag: tag), state, &effects) }
            let count = state.projection.holdTag(tag)
            Self.tellIdleWaiters(&state, &effects)
            return count
        }
    }

    /// `release(tagged:)`: logs a `released` record if the tag was held, schedules its messages
    /// that no other held tag keeps, and plans. Returns how many pending messages carry the tag.
    func releaseTag(_ tag: String, at instant: EngineInstant) -> (Int, Effects) {
        write { state, effects -> Int in
            guard !state.closed else { return 0 }
            guard state.projection.tags.held.contains(tag) else { return state.projection.ids(tagged: tag).count }
            append(.released(tag: tag), state, &effects)
            let count = state.projection.releaseTag(tag)
            effects.plan(at: instant)
            return count
        }
    }

    /// `cancel(tagged:)`: a `cancelled` record for each pending message with the tag, in as few
    /// batches as fit a segment (each lands whole or not at all), then each is resolved as
    /// `cancel(_:)` resolves one. Returns how many were cancelled.
    func cancel(tagged tag: String) -> (Int, Effects) {
        write { state, effects -> Int in
            guard !state.closed else { return 0 }
            let ids = state.projection.ids(tagged: tag)
            guard !ids.isEmpty else { return 0 }
            appendCancellations(ids, state, &effects)
            for id in ids {
                let attempts = state.projection.slot(of: id).map { Int($0.attempts) } ?? 0
                Self.resolve(id, .cancelled, attempts: attempts, &state, &effects)
            }
            return ids.count
        }
    }

    /// Under the lock: the `cancelled` records of `ids`. A failure is reported, and the
    /// cancellations go on in memory (as `append` does).
    private func appendCancellations(_ ids: [MessageID], _ state: CoreState, _ effects: inout Effects) {
        let entries = ids.map { LogEntry(kind: .cancelled, body: Event.cancelled($0).encoded()) }
        do {
            effects.appendedThrough = try appendInBatches(entries, state)
        } catch {
            effects.emit(.storageFailed(CourierError(error, while: "logging the cancellation of \(ids.count)")))
        }
    }

    /// Under the lock: `entries` in batches of at most a quarter segment (a batch must fit
    /// one), each landing whole or not at all. Returns the last sequence appended.
    func appendInBatches(_ entries: [LogEntry], _ state: CoreState) throws(LogError) -> UInt64? {
        let budget = limits.segmentSizeBytes / 4
        var next = 0, last: UInt64?
        // Each turn appends at least one record: bounded by the entries.
        while next < entries.count {
            var end = next, bytes = 0
            while end < entries.count {
                let size = Format.worstCaseRecordBytes(bodyBytes: entries[end].body.count)
                if end > next && bytes + size > budget { break }
                bytes += size
                end += 1
            }
            last = try log.append(batch: Array(entries[next..<end]), at: state.wallMilliseconds).last?.sequence
            next = end
        }
        return last
    }

    /// Under the lock (the compactor's last step before its sync): a `held` record for every
    /// tag held now, above the segments about to be forgotten, so a hold outlives its record.
    func appendHolds() throws(LogError) {
        _ = try write { (state, _) throws(LogError) in
            let held = state.projection.tags.held.sorted()
            guard !held.isEmpty else { return }
            _ = try appendInBatches(held.map { LogEntry(kind: .held, body: Event.held(tag: $0).encoded()) }, state)
        }
    }

    /// The tags held now, sorted.
    var heldTags: [String] { read { $0.projection.tags.held.sorted() } }

    /// The pending messages a held tag keeps from delivery.
    var heldIDs: Set<MessageID> { read(\.projection.heldIDs) }
}

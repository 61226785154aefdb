import CourierLog

/// The compactor keeps disk use near twice the live data plus one segment.
///
/// A message's state lives in its latest full record (`enqueued` or `snapshot`) plus the
/// deltas after it, so the log may forget everything below the oldest full record of any
/// pending message. When resolved messages dominate the sealed segments, the compactor:
///
/// 1. under the courier's lock, appends a `snapshot` for each pending message whose full
///    record lies in a sealed segment (the lock orders it before any later `delivered`);
/// 2. syncs the log;
/// 3. tells the log to forget every segment below the active one.
///
/// A crash between any two steps replays to the same pending set: before 2, the snapshots may
/// be lost but the old records are all there; after 2, the old records and the snapshots say
/// the same thing ("last full state wins"); during 3, the log loses a prefix of segments, and
/// deltas left without their full state belong to resolved messages and are ignored.
extension Courier {
    /// Compactions run since open (public as `compactionCount` in CourierTesting).
    @_spi(CourierTesting)
    public var compactionCountForTesting: Int { lock.withLock { core.compactions } }

    func compactIfWorthIt() {
        guard configuration.compactionEnabled else { return }
        compact(force: false)
    }

    /// One compaction; `force` skips the "is it worth it" test (for tests).
    func compact(force: Bool) {
        guard let floor = prepareCompaction(force: force) else { return }
        defer { lock.withLock { core.compacting = false } }
        do {
            try log.sync()
            try log.forget(below: floor)
        } catch {
            let effects = lock.withLock { () -> Effects in
                var e = Effects()
                e.events = [.storageFailed("compaction: \(error)")]
                e.subscribers = Array(core.subscribers.values)
                return e
            }
            effects.run()
        }
    }

    /// Step 1, under the lock. Returns the floor to forget below, or nil if not worth it now.
    private func prepareCompaction(force: Bool) -> UInt64? {
        lock.withLock { () -> UInt64? in
            guard !core.closed, !core.compacting else { return nil }
            let segments = log.segmentNames
            guard segments.count >= 2 else { return nil }
            let rolled = segments.count != core.segmentsAtLastCheck
            guard force || rolled || core.resolvedSinceCompaction >= configuration.compactionThreshold else { return nil }
            core.segmentsAtLastCheck = segments.count
            guard let floor = SegmentName.parse(segments.last!) else { return nil }
            let pinned = core.scheduler.pinned(below: floor)
            let pinnedBytes = pinned.reduce(0) { $0 + $1.body.count + $1.url.utf8.count + 128 }
            let sealedBytes = log.sizeBytes - configuration.segmentSizeBytes / 2  // the active one is about half full
            // Compact only when dead records dominate: re-writing the live ones must cost at
            // most half of what deleting the sealed segments frees.
            guard force || pinnedBytes * 2 <= sealedBytes else { return nil }
            for state in pinned {
                do {
                    let sequence = try log.append(Event.snapshot(state).encoded(), kind: .snapshot)
                    core.scheduler.moveFullState(state.id, to: sequence)
                } catch {
                    return nil  // a full disk: keep every old segment; try again after the next roll
                }
            }
            core.compacting = true
            core.resolvedSinceCompaction = 0
            core.compactions += 1
            core.segmentsAtLastCheck = 0  // the forget changes the count: look again next time
            return floor
        }
    }
}

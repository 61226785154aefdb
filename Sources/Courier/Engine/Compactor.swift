import CourierLog

/// The compactor keeps disk use near twice the live data plus one segment.
///
/// A message's state lives in its latest full record (`enqueued` or `snapshot`) plus the
/// deltas after it, so the log may forget everything below the oldest full record of any
/// pending message. When resolved messages dominate the sealed segments, the compactor:
///
/// 1. re-snapshots each pending message whose full record lies in a sealed segment: it reads
///    the record back, then appends a `snapshot` under the outbox's lock (which orders it
///    before any later `delivered`);
/// 2. syncs the log;
/// 3. tells the log to forget every segment below the active one.
///
/// A crash between any two steps replays to the same pending set: before 2, the snapshots may
/// be lost but the old records are all there; after 2, the old records and the snapshots say
/// the same thing ("last full state wins"); during 3, the log loses a prefix of segments, and
/// deltas left without their full state belong to resolved messages and are ignored.
/// It runs on the I/O queue, never on the cooperative pool.
extension Courier {
    /// Compactions run since open (public as `compactionCount` in CourierTesting).
    @_spi(CourierTesting)
    public var compactionCountForTesting: Int { outbox.compactionCount }

    /// One compaction now, whether or not it is worth it, on the calling thread (benchmarks
    /// time it). Blocking file work: never call it on the cooperative pool.
    @_spi(CourierTesting)
    public func compactNowForTesting() { compact(force: true) }

    func compactIfWorthIt() {
        guard configuration.isCompactionEnabled else { return }
        compact(force: false)
    }

    /// One compaction; `force` skips the "is it worth it" test (for tests).
    func compact(force: Bool) {
        guard let plan = outbox.planCompaction(force: force) else { return }
        do throws(LogError) {
            try outbox.writeSnapshots(plan)
            try log.sync()
            try log.forget(below: plan.floor)
            outbox.endCompaction(succeeded: true)
        } catch {
            outbox.endCompaction(succeeded: false)
            outbox.report("compaction: \(error)").run()
        }
    }
}

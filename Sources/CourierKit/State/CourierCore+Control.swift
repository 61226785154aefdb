import CourierLog
import Foundation

/// The core's entry points besides the delivery path's: every intent is a `CoreInput`, told in
/// one critical section; and one read of what the facade shows.
extension CourierCore {
    /// Tells the core `input`, in one critical section (`CoreState.handle`), at `instant` if it
    /// can make something runnable (see `CoreInput`); the effects say what it answers
    /// (`Effects.reply`: a pass or next attempt its plan started among the rest).
    ///
    /// After an outcome, a compaction now worth running is the core's to start, on the I/O queue
    /// (`Launcher.startCompaction`): no delivery slot waits for it (`settle()` does, and
    /// `close()`'s last file work queues behind it).
    @discardableResult
    func handle(_ input: CoreInput, at instant: EngineInstant? = nil) -> Effects {
        write { state, effects in
            state.handle(input, at: instant, &effects)
            guard case .ended = input, limits.compacts else { return }
            appendRecords(&state, &effects)  // first: the compactor weighs the log with them
            if let plan = planCompaction(&state, force: false) { state.launcher?.startCompaction(plan) }
        }.1
    }

    /// What the facade shows of the core, in one read: cheap values only.
    struct Status {
        var isPaused: Bool
        var isClosed: Bool
        var pendingCount: Int
        /// The hand-offs (tests, foreground return).
        var handOffs: [MessageID: HandOff]
        /// The hand-off passes under way.
        var passes: [Task<Int, Never>]
        /// The reconciliation under way or done, if background hand-off is on (the engine, and
        /// completions, start after it).
        var reconciliation: Task<Void, Never>?
        /// When the engine's one timer fires, on its clock (time since the courier opened); nil
        /// if none is armed.
        var timerDeadline: Duration?
        var heldTags: Set<String>
        var compactions: Int
    }

    var status: Status {
        read { state in
            Status(
                isPaused: state.scheduler.mode.paused, isClosed: state.closed, pendingCount: state.projection.count,
                handOffs: state.handOffs, passes: Array(state.scheduler.passes.values),
                reconciliation: state.reconciliation, timerDeadline: state.scheduler.timer?.deadline,
                heldTags: state.projection.tags.held, compactions: state.compaction.compactions)
        }
    }

    /// The pending messages' ids, oldest first.
    var pendingIDs: [MessageID] { read { $0.projection.liveSlotsInOrder().map(\.id) } }

    /// Whether message `id` is pending, or remembered as resolved (the extension outbox's
    /// collection adds a message once).
    func knows(_ id: MessageID) -> Bool {
        read { $0.projection.slotIndex(of: id) != nil || $0.resolved[id] != nil }
    }

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

extension CourierCore {
    /// Where message `id`'s `delivered` record lies, if it is remembered as delivered and the
    /// record was appended (`ResolvedMemory`): what `delivered(_:)` reads its answer back from.
    func deliveredRecordAddress(of id: MessageID) -> RecordAddress? {
        read { state in
            guard case .delivered(_, let address)? = state.resolved[id] else { return nil }
            return address
        }
    }

    /// Message `id`'s full state if it is among the recently sent (no file work).
    func recentState(_ id: MessageID) -> MessageState? { read { $0.recentState(of: id) } }

    /// Reads message `id`'s full state back from the log (one positioned read, checksum
    /// verified), with the attempt count and due time the projection holds. Nil if the message
    /// is no longer pending. Blocking file work: never call it on the cooperative pool.
    func loadState(_ id: MessageID) throws(LogError) -> MessageState? {
        // A compaction may move the record between the lookup and the read (`.notFound`): look
        // again. It moves a record at most once per compaction, so three tries are plenty.
        var lastError = LogError(.notFound, "message \(id) kept moving")
        for _ in 0..<3 {
            guard let slot = read({ $0.projection.slot(of: id) }) else { return nil }
            do throws(LogError) {
                var message = try log.readState(at: slot.address, of: id).state
                slot.stamp(&message)
                return message
            } catch let error where error.code == .notFound {
                lastError = error
            }
        }
        throw lastError
    }
}

extension Event {
    /// The full state an `enqueued` or `snapshot` event carries.
    var fullState: MessageState? {
        switch self {
        case .enqueued(let s), .snapshot(let s): s
        default: nil
        }
    }
}

/// The core's intents for background hand-off (`Courier.BackgroundUploads`). A handed-off
/// message is in flight in the projection, so the engine never attempts it, until its task's
/// completion is heard (or reconciliation finds the task gone).
extension CourierCore {
    /// A pass's messages, in one section: their full states where kept in memory (nil: read
    /// them back from the log), and whether messages go to the session now.
    func handOffStates(_ ids: [MessageID]) -> (states: [MessageState?], mayHandOff: Bool) {
        read { state in (ids.map { state.recentState(of: $0) }, state.scheduler.mode.mayHandOff) }
    }

    /// The message task `task` carries, and its hand-off: by the task's description, or by its
    /// identifier if the description is not Courier's (the system may not keep it).
    func handOff(carriedBy task: BackgroundUploadTask) -> (MessageID, HandOff)? {
        read { state in
            if let parsed = HandOff.parse(taskDescription: task.taskDescription) {
                guard let handOff = state.handOffs[parsed.id], handOff.ticket == parsed.ticket else { return nil }
                return (parsed.id, handOff)
            }
            let identifier = UInt64(bitPattern: Int64(task.identifier))
            guard identifier != HandOff.unknownTask else { return nil }
            return state.handOffs.first { $0.value.taskIdentifier == identifier }.map { ($0.key, $0.value) }
        }
    }

    /// Whether a handed-off message goes to a destination that has said nothing yet since the
    /// courier opened (its hand-off was blind: its first limit's worth, 4 at first).
    /// Only hand-offs that may begin by `nowMilliseconds` count: one whose begin date is minutes
    /// away cannot answer while the app is still up.
    func awaitsFirstAnswers(nowMilliseconds now: UInt64) -> Bool {
        read { state in
            // Bounded by the hand-offs (at most `maximumOutstandingTasks`).
            state.handOffs.contains { id, handOff in
                guard handOff.earliestBeginMilliseconds <= now, let i = state.projection.slotIndex(of: id) else {
                    return false
                }
                return !state.projection.governor(ofSlot: i).hasReported
            }
        }
    }
}

/// The compactor keeps disk use near twice the live data plus one segment.
///
/// A message's state lives in its latest full record (`enqueued` or `snapshot`) plus the
/// deltas after it, so the log may forget everything below the oldest full record of any
/// pending message. When resolved messages dominate the sealed segments, the compactor:
///
/// 1. re-snapshots each pending message whose full record lies in a sealed segment: it reads
///    the record back, then appends a `snapshot` under the core's lock (which orders it
///    before any later `delivered`), and re-appends a `held` record for each tag held now;
/// 2. syncs the log;
/// 3. tells the log to forget every segment below the active one.
///
/// A crash between any two steps replays to the same pending set: before 2, the snapshots may
/// be lost but the old records are all there; after 2, the old records and the snapshots say
/// the same thing ("last full state wins"); during 3, the log loses a prefix of segments, and
/// deltas left without their full state belong to resolved messages and are ignored.
/// It runs on the I/O queue, never on the cooperative pool.
struct CompactionState {
    /// Messages resolved since the compactor last looked.
    var resolvedSinceCompaction = 0
    var compacting = false
    /// Segment count when the compactor last looked (it looks again after a roll).
    var segmentsAtLastCheck = 0
    /// Times the compactor weighed the pinned records (each an O(pending) scan): at most once
    /// per roll and once per `compactionThreshold` resolutions, whatever it decided.
    var checks = 0
    var compactions = 0

    /// A compaction forgot what it planned to: one more, and the segments are weighed again next
    /// time (the forget changed their count).
    mutating func succeeded() { (compactions, segmentsAtLastCheck) = (compactions + 1, 0) }
}

/// A compaction decided on: forget below `floor` once `pinned` are re-snapshotted above it.
struct CompactionPlan: Sendable {
    var floor: UInt64
    var pinned: [(id: MessageID, address: RecordAddress)]
}

extension CourierCore {
    /// Carries out a compaction planned (and marked under way) by `planCompaction`: the three
    /// steps above. Blocking file work: run it on the I/O queue. Returns why it failed, if it
    /// did (it then forgot nothing); either way, end it with `CoreInput.compactionEnded`.
    func compact(_ plan: CompactionPlan) -> CourierError? {
        do throws(LogError) {
            try writeSnapshots(plan)
            // A `held` record for every tag held now, above the segments about to be
            // forgotten, so a hold outlives its record.
            _ = try write { (state, _) throws(LogError) in
                let held = state.projection.tags.held.sorted()
                _ = try appendInBatches(held.map { LogEntry(kind: .held, body: Event.held(tag: $0).encoded()) }, state)
            }
            try log.sync()
            try log.forget(below: plan.floor)
            return nil
        } catch {
            return CourierError(error, while: "compaction")
        }
    }

    /// Whether to compact now and what to re-snapshot (see `planCompaction(_:force:)`).
    func planCompaction(force: Bool) -> CompactionPlan? {
        write { state, _ in planCompaction(&state, force: force) }.0
    }

    /// Under the core's lock: whether to compact now and what to re-snapshot. Compacts only
    /// when dead records dominate: re-writing the live ones must cost at most half of what
    /// deleting the sealed segments frees. Marks a compaction under way (end it with
    /// `endCompaction()`). Cheap (no file work): an outcome's critical section asks it, and
    /// starts one worth running on the I/O queue (`Launcher.startCompaction`).
    func planCompaction(_ state: inout CoreState, force: Bool) -> CompactionPlan? {
        guard !state.closed, !state.compaction.compacting else { return nil }
        let segments = log.segmentSummary
        guard segments.count >= 2 else { return nil }
        let rolled = segments.count != state.compaction.segmentsAtLastCheck
        guard force || rolled || state.compaction.resolvedSinceCompaction >= limits.compactionThreshold else {
            return nil
        }
        // The trigger is used up by looking, whatever the answer: a compaction found not worth
        // it is weighed again after the next roll or `compactionThreshold` resolutions, not on
        // every outcome (each look scans every pending message).
        state.compaction.segmentsAtLastCheck = segments.count
        state.compaction.resolvedSinceCompaction = 0
        state.compaction.checks += 1
        let floor = segments.activeFirstSequence
        let pinned = state.projection.pinned(below: floor)
        let pinnedBytes = pinned.reduce(0) { $0 + Int($1.address.length) }
        let sealedBytes = log.sizeBytes - limits.segmentSizeBytes / 2  // the active one is about half full
        guard force || pinnedBytes * 2 <= sealedBytes else { return nil }
        state.compaction.compacting = true
        // In arrival order.
        return CompactionPlan(floor: floor, pinned: pinned.sorted { $0.order < $1.order }.map { ($0.id, $0.address) })
    }

    /// Re-snapshots every pinned message still pending, in chunks: its record is read back
    /// outside the lock, then the snapshot (with the attempt count and due time the projection
    /// holds now) is appended under it, so a later `delivered` can only follow it. Blocking
    /// file work: run it on the I/O queue. Throws if a record cannot be read or the disk is
    /// full: then nothing may be forgotten.
    func writeSnapshots(_ plan: CompactionPlan) throws(LogError) {
        var next = 0
        // Each turn handles at least one message: bounded by the pinned count.
        while next < plan.pinned.count {
            var chunk: [(MessageState, RecordAddress)] = []
            var chunkBytes = 0
            // A batch must fit one segment: a chunk is at most a quarter of one, or a single
            // record (which always fits: `send` checked it against `maximumRecordBytes`).
            let budget = min(limits.segmentSizeBytes / 4, limits.segmentSizeBytes - Format.segmentHeaderSize)
            while next < plan.pinned.count {
                let (id, address) = plan.pinned[next]
                let (state, bodyBytes) = try log.readState(at: address, of: id)
                let bytes = Format.worstCaseRecordBytes(bodyBytes: bodyBytes + 64)
                if !chunk.isEmpty && chunkBytes + bytes > budget { break }  // starts the next chunk
                next += 1
                chunk.append((state, address))
                chunkBytes += bytes
            }
            try appendSnapshots(chunk)
        }
    }

    private func appendSnapshots(_ chunk: [(MessageState, RecordAddress)]) throws(LogError) {
        _ = try write { (state, _) throws(LogError) in
            var entries: [LogEntry] = []
            var snapshots: [(id: MessageID, entry: Int)] = []
            for (var message, address) in chunk {
                // Resolved (or being withdrawn), or moved by an append since the read: nothing to keep.
                guard let slot = state.projection.slot(of: message.id), slot.address == address,
                    !state.withdrawing.contains(message.id)
                else { continue }
                slot.stamp(&message)
                snapshots.append((message.id, entries.count))
                entries.append(LogEntry(kind: .snapshot, body: Event.snapshot(message).encoded()))
                // A recorded hand-off goes along: its record may lie in a segment about to go.
                if let handOff = state.handOffs[message.id], handOff.taskIdentifier != HandOff.unknownTask {
                    entries.append(LogEntry(kind: .handedOff, body: Event.handedOff(message.id, handOff).encoded()))
                }
            }
            guard !entries.isEmpty else { return }
            let addresses = try log.append(batch: entries, at: state.wallMilliseconds)
            for (id, entry) in snapshots { state.projection.moveFullState(id, to: addresses[entry]) }
        }
    }
}

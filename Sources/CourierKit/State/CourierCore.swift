import CourierLog
import Logging

/// A task in `delivered(_:)`: resumed exactly once, with success, a `CourierError`, or
/// `CancellationError`.
typealias DeliveryWaiter = CheckedContinuation<Result<UInt16, any Error>, Never>

/// The one owner of a courier's durable state: the projection, the log appends that change it,
/// and everyone waiting on it (delivery waiters, idle waiters, event subscribers, callbacks).
///
/// Every operation is an intent ("enqueue", "take what is due", "record an outcome", "plan a
/// compaction") that appends to the log and updates the projection in **one critical
/// section**, so log order is projection order by construction; it returns the side effects
/// (`Effects`) for the caller to run after the lock is released, so no user code ever runs
/// under it. Events emitted inside `write` reach every subscriber current at that moment,
/// without any call site having to remember to copy them.
///
/// `Courier` is the facade around it: it validates and encodes, reads the clock, runs effects,
/// owns the transport, and hands blocking file work to its own queue. It calls intents only:
/// nothing outside `State/` reads or writes `CoreState` (`make format-check` enforces it), and
/// the core carries out its own plans (`Scheduler.swift`).
final class CourierCore {
    let log: MessageLog
    let limits: Limits
    /// Everything mutable, behind the core's lock: only reached through `write` and `read`.
    private let state: Locked<CoreState>

    /// Settings the core enforces.
    struct Limits {
        var maximumStorageBytes: Int
        var segmentSizeBytes: Int
        /// `Configuration.maximumPendingMessages` (`.max` for none), and the tags whose oldest
        /// message a send drops at that bound (`whenFull`).
        var maximumPendingMessages: Int
        var droppableTags: Set<String>
        /// The tags `whenFull` says `.refuse`: a message with one is never dropped.
        var protectedTags: Set<String>
        var compactionThreshold: Int
        /// What the scheduler plans within.
        var scheduler: Scheduler.Limits
        /// Whether an outcome may start a compaction.
        var compacts: Bool
        /// `durability: .always`: every section that appends is committed (`write`).
        var syncsEachRecord: Bool
    }

    /// Where events worth a log line go (`Effects.run` writes them, outside the lock); nil if
    /// the logger wants none of them: then events are collected only for subscribers.
    private let eventLogger: Logger?

    init(log: MessageLog, limits: Limits, state: CoreState, logger: Logger) {
        self.log = log
        self.limits = limits
        // No fsync while it is held: every thread waiting for it (event loops among them) would
        // wait for the disk too. The log asserts it; the file system double refuses such calls.
        self.state = Locked(state, forbidsBlockingIO: true)
        eventLogger = logger.logLevel <= .info ? logger : nil
    }

    /// Runs `body` on the state holding the lock, and returns its result with the effects it
    /// collected. Events it emitted go to every subscriber current at that moment.
    ///
    /// **The one way out of the lock.** The plan the section asked for (`Effects.plan`) runs
    /// when the section ends, never inside it. Under `durability: .always`, a section that
    /// appended a record is committed before anything of it is seen: the lock is let go, the
    /// record is fsynced, and a second section plans and yields the events (`commit`); no plan
    /// runs anywhere while a record waits for its fsync (`SchedulerState.awaitingSync`), so no
    /// intent can start an attempt, or show an event, that a power cut could undo.
    func write<R, E: Error>(_ body: (inout CoreState, inout Effects) throws(E) -> R) throws(E) -> (R, Effects) {
        // GRDB's discipline: one owner, reached only through closures, never from inside one
        // (the lock is not recursive: a nested call would deadlock; this names it instead, in
        // every build: `Locked` tracks its holders in every build anyway).
        precondition(!self.state.isHeldByCurrentThread, "CourierCore.write called inside write or read")
        let (result, effects) = try section(Effects()) { (state, effects) throws(E) -> R in
            let result = try body(&state, &effects)
            appendRecords(&state, &effects)
            if limits.syncsEachRecord && effects.appendedThrough != nil {
                state.scheduler.awaitingSync += 1  // its plan, and everyone's, waits for `commit`
            } else {
                carryOutPlan(&state, &effects)
            }
            return result
        }
        guard limits.syncsEachRecord, let sequence = effects.appendedThrough else { return (result, effects) }
        return (result, commit(effects, through: sequence))
    }

    /// `.always`: makes the records of a section durable (off the lock, sharing the fsync with
    /// concurrent callers), then, in a second section, lets them be seen: the events are
    /// yielded under the lock (a plan of another section could start these messages as soon as
    /// it is let go), and the plan runs if no other record waits for its fsync. A failed fsync
    /// fails the log: a send's message is dropped (`send` throws); any other change stands, in
    /// memory, and is reported (`.storageFailed`). Blocks for the fsync: never call `write`
    /// with an intent that appends on an event loop or the cooperative pool under `.always`.
    private func commit(_ appended: Effects, through sequence: UInt64) -> Effects {
        var failure: LogError?
        do throws(LogError) { try log.sync(through: sequence) } catch { failure = error }
        return section(appended) { state, effects in
            state.scheduler.awaitingSync -= 1
            state.withdrawing.subtract(effects.withdrawals.map(\.0))
            if let failure {
                Self.syncFailed(failure, through: sequence, &state, &effects)
            } else {
                state.withdraw(effects.withdrawals, &effects)
            }
            effects.yieldEventsSoFar(to: state.subscribers.values)
            carryOutPlan(&state, &effects)
        }.1
    }

    /// One critical section: `body` on the state, then the bookkeeping every section does.
    private func section<R, E: Error>(
        _ start: Effects, _ body: (inout CoreState, inout Effects) throws(E) -> R
    ) throws(E) -> (R, Effects) {
        try self.state.withLock { (state) throws(E) -> (R, Effects) in
            #if COURIER_LOCK_PROBE
            let probeStart = ContinuousClock.now
            let probeSegment = log.segmentSummary.activeFirstSequence
            defer {
                Courier.lockProbe?(
                    probeStart.duration(to: .now), log.segmentSummary.activeFirstSequence != probeSegment)
            }
            #endif
            var effects = start
            effects.listening = !state.subscribers.isEmpty || eventLogger != nil
            effects.logger = eventLogger
            let result = try body(&state, &effects)
            if !effects.events.isEmpty { effects.subscribers = Array(state.subscribers.values) }
            if !effects.endedHandOffs.isEmpty { effects.endHandOff = state.endHandOff }
            state.criticalSections &+= 1
            #if DEBUG
            // Writes end with the state's invariants checked (the projection's, and hand-offs'
            // and the engine's counts): each one while at most 16 messages are pending, every
            // (pending / 16)th beyond, so a check, O(pending), costs about 16 slot visits per
            // write on average whatever the load (more held the lock long enough, in debug
            // builds, to stall the test suite's timed scenarios).
            if state.criticalSections % UInt64(max(1, state.projection.count / 16)) == 0,
                let broken = state.brokenInvariant()
            {
                assertionFailure("core invariant broken: \(broken)")
            }
            #endif
            return (result, effects)
        }
    }

    /// Reads the state holding the lock.
    func read<R>(_ body: (CoreState) -> R) -> R {
        precondition(!state.isHeldByCurrentThread, "CourierCore.read called inside write or read")
        return state.withLock { state in
            state.criticalSections &+= 1
            return body(state)
        }
    }

    /// Whether the calling thread holds the core's lock (asserted: no app code under it).
    var isHeldByCurrentThread: Bool { state.isHeldByCurrentThread }
}

#if COURIER_LOCK_PROBE
extension Courier {
    /// `make lock-hold` only (built with `-Xswiftc -DCOURIER_LOCK_PROBE`; `courier-bench` keeps
    /// the figures): told how long each critical section held the lock, and whether the log
    /// rolled to a new segment inside it. Set once, before any courier opens.
    @_spi(CourierTesting) nonisolated(unsafe) public static var lockProbe: (@Sendable (Duration, Bool) -> Void)?
}
#endif

/// Why `CourierCore` is `Sendable`: `state` is only reached holding its lock (through `write` and
/// `read`); `log` is thread-safe; `limits` and `eventLogger` are immutable.
extension CourierCore: @unchecked Sendable {}

// MARK: - Sending

extension CourierCore {
    /// Appends a message's `enqueued` record and adds it to the projection, and plans, in one
    /// critical section: `send` takes the core's lock once (under `.always`, twice: `write`).
    func enqueue(
        _ encoded: [UInt8], state message: MessageState, callbacks: Callbacks, at instant: EngineInstant
    ) throws(CourierError) -> Effects {
        let id = message.id
        let (_, effects) = try write { (state, effects) throws(CourierError) in
            guard !state.closed else { throw CourierError(.closed, "the courier is closed") }
            let size = log.sizeBytes
            guard size + encoded.count <= limits.maximumStorageBytes else {
                throw CourierError(
                    .storageFull,
                    "the log holds \(size) bytes; the limit is \(limits.maximumStorageBytes) "
                        + "(Configuration.maximumStorageBytes)"
                )
            }
            let replaced = state.projection.replaced(by: message.replacing, id: id).flatMap {
                state.withdrawing.contains($0) ? nil : $0
            }
            // A send that replaces a pending message needs no room.
            let dropping = replaced == nil ? try Self.room(for: message, in: state, limits) : nil
            let address: RecordAddress
            do throws(LogError) {
                state.wallMilliseconds = max(state.wallMilliseconds, message.createdMilliseconds)
                address = try log.append(enqueued: encoded, at: state.wallMilliseconds)
            } catch {
                throw CourierError(error)
            }
            effects.appendedThrough = address.sequence
            if limits.syncsEachRecord { effects.enqueued = id }
            let added = state.projection.applyFullState(
                id: id, url: message.url, orderingKey: message.orderingKey, tags: message.tags,
                replacing: message.replacing, solo: !message.isBatchable, attempts: 0,
                dueMilliseconds: message.nextDueMilliseconds,
                address: address)
            if added { state.recent.insert(message, order: state.projection.lastAddedOrder) }
            if callbacks.onDelivered != nil || callbacks.onAbandoned != nil { state.callbacks[id] = callbacks }
            effects.emit(.enqueued(id))
            // Withdrawn by the new message's record, as `cancel` would (after the add: never idle between).
            var withdrawals = replaced.map { [($0, Resolution.cancelled)] } ?? []
            if case let (oldest, attempts, tag)? = dropping {
                // Its record follows the new message's in this section: a crash between them
                // leaves both pending, one over the bound, and drops nothing unlogged.
                let reason = AbandonReason.dropped(tag: tag)
                effects.append(.abandoned(oldest, attempt: attempts, reason: reason.description))
                withdrawals.append((oldest, .abandoned(reason)))
            }
            // `.always`: once the new record is durable (`commit`); never if it cannot be.
            if limits.syncsEachRecord {
                effects.withdrawals = withdrawals
                state.withdrawing.formUnion(withdrawals.map(\.0))
            } else {
                state.withdraw(withdrawals, &effects)
            }
            effects.plan = PlanRequest(instant: instant)
        }
        return effects
    }

    /// At `maximumPendingMessages`, the message a send drops to make room: the oldest pending one
    /// with a `.dropOldest` tag (`Configuration.whenFull`), whatever the send's own tags. Throws
    /// if there is none. O(tagged messages), at the bound only.
    private static func room(
        for message: MessageState, in state: CoreState, _ limits: Limits
    ) throws(CourierError) -> (MessageID, attempts: UInt32, tag: String)? {
        guard state.projection.count - state.withdrawing.count >= limits.maximumPendingMessages else { return nil }
        guard
            case let (slot, tag)? = state.projection.oldest(
                taggedWithOneOf: limits.droppableTags.sorted(), sparing: limits.protectedTags, or: state.withdrawing)
        else {
            throw CourierError(
                .storageFull,
                "\(state.projection.count) messages are pending; the limit is \(limits.maximumPendingMessages) "
                    + "(Configuration.maximumPendingMessages)")
        }
        return (slot.id, slot.attempts, tag)
    }

    /// `.always`: the fsync of records through `sequence` failed (the log is failed now). The
    /// message a send enqueued is forgotten, as if never sent: whoever waits on it, or on an
    /// empty courier, is told, and its `.enqueued` is never seen; `send` throws. Any other
    /// change stands, in memory, and is reported; the messages the send would have withdrawn
    /// stay pending.
    static func syncFailed(
        _ error: LogError, through sequence: UInt64, _ state: inout CoreState, _ effects: inout Effects
    ) {
        guard let id = effects.enqueued else {
            effects.emit(.storageFailed(CourierError(error, while: "making record \(sequence) durable")))
            return
        }
        let thrown = CourierError(notDurable: id, error)
        effects.syncFailure = thrown
        effects.events.removeAll { $0 == .enqueued(id) }
        state.callbacks[id] = nil
        if let removed = state.projection.remove(id) { state.recent.remove(id, order: removed.order) }
        effects.withdrawals = []  // they stay pending (the failed log takes no later send anyway)
        effects.answered += (state.waiters.removeValue(forKey: id) ?? [:]).values.map { ($0, .failure(thrown)) }
        state.tellIdleWaiters(&effects)
    }
}

// MARK: - Appending

extension CourierCore {
    /// Under the lock, as a section's body returns: the records it asked for (`Effects.append`),
    /// in order, stamped with the latest wall time the core has seen (`CoreState.wallMilliseconds`:
    /// the log never calls the app's clock). A failure to log is reported where it happened among
    /// the section's events, and the change goes on in memory (the worst case is a duplicate POST
    /// after a restart, which the key dedupes).
    func appendRecords(_ state: inout CoreState, _ effects: inout Effects) {
        var told = 0
        for (batch, position) in effects.appends {
            do throws(LogError) {
                let addresses = try appendInBatches(batch.map { LogEntry(kind: $0.kind, body: $0.encoded()) }, state)
                effects.appendedThrough = addresses.last?.sequence
                // Where each answer lies, for `delivered(_:)` to read back (`ResolvedMemory`).
                for (event, address) in zip(batch, addresses) {
                    if case .delivered(let id, _, _, _, _) = event { state.resolved.locate(id, at: address) }
                }
            } catch {
                guard effects.listening else { continue }
                let subject =
                    batch.count > 1 ? "\(batch.count) messages" : batch[0].id.map { "message \($0)" } ?? "a tag"
                let failure = CourierError(error, while: "logging \(batch[0].kind) of \(subject)")
                effects.events.insert(.storageFailed(failure), at: min(position + told, effects.events.count))
                told += 1
            }
        }
        effects.appends.removeAll()
    }

    /// Under the lock: `entries` in batches of at most a quarter segment (a batch must fit
    /// one), each landing whole or not at all. Returns where each landed.
    func appendInBatches(_ entries: [LogEntry], _ state: CoreState) throws(LogError) -> [RecordAddress] {
        let budget = limits.segmentSizeBytes / 4
        var next = 0, addresses: [RecordAddress] = []
        // Each turn appends at least one record: bounded by the entries.
        while next < entries.count {
            var end = next, bytes = 0
            while end < entries.count {
                let size = Format.worstCaseRecordBytes(bodyBytes: entries[end].body.count)
                if end > next && bytes + size > budget { break }
                bytes += size
                end += 1
            }
            addresses += try log.append(batch: Array(entries[next..<end]), at: state.wallMilliseconds)
            next = end
        }
        return addresses
    }
}

struct Callbacks {
    var onDelivered: (@Sendable (MessageID) -> Void)?
    var onAbandoned: (@Sendable (MessageID, CourierError) -> Void)?
}

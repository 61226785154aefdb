import CourierLog
import Foundation
import Logging
#if canImport(os)
import os
#endif

/// What both runners share: reading a message back, preparing its request, and the one
/// outcome path. An engine attempt (the runner at the end of this file) and a background
/// upload (`Courier+HandOff.swift`, `Courier+HandOffCompletion.swift`) differ only in who
/// sends the request and when.
extension Courier {
    /// Message `id`'s full state: `kept` if given (an attempt's, kept when it was taken), else
    /// from memory or read back from the log (on the read queue: a positioned read); nil if it
    /// is no longer pending; the error if it cannot be read.
    func readState(of id: MessageID, kept: MessageState? = nil) async -> Result<MessageState?, LogError> {
        if let recent = kept ?? core.recentState(id) { return .success(recent) }
        return await onIOQueue(readQueue) { [core] in Result { () throws(LogError) in try core.loadState(id) } }
    }

    /// A message's request (its URL, headers and body, and its `Idempotency-Key`) after
    /// `prepareRequest` (if any). A throw is a failed attempt that sent nothing; only the
    /// error's type is kept (it may hold secrets).
    func preparedRequest(
        for state: MessageState, attempt: Int, riders: [MessageState] = []
    ) async -> Result<DeliveryRequest, TransportFailure> {
        var headers: [String: String] = [:]
        for h in state.headers { headers[h.name] = h.value }
        headers["Idempotency-Key"] = state.id.description
        var request = DeliveryRequest(
            url: URL(string: state.url)!, headers: headers, body: Data(state.body),
            timeout: configuration.requestTimeout, messageID: state.id, attempt: attempt, tags: Set(state.tags))
        if !riders.isEmpty { Self.batch(&request, [state] + riders, body: configuration.batchBody) }
        if configuration.options(for: state.url)?.gzip == true, let compressed = Gzip.compress(request.body),
            compressed.count < request.body.count
        {
            request.body = compressed
            request.headers["Content-Encoding"] = "gzip"
        }
        guard let prepare = configuration.prepareRequest else { return .success(request) }
        do {
            try await prepare(&request)
            return .success(request)
        } catch  where Task.isCancelled || error is CancellationError {
            return .failure(TransportFailure(.cancelled, "cancelled"))
        } catch {
            return .failure(TransportFailure(.requestPreparation, "prepareRequest threw \(type(of: error))"))
        }
    }

    /// Makes `request` the batch of `members` (`Batching`): the JSON array of their keys and
    /// bodies, or what the app's `make` makes of them (`Configuration.batchBody`), under a key
    /// of its own that the same members give on every retry.
    static func batch(
        _ request: inout DeliveryRequest, _ members: [MessageState], body make: BatchBody? = nil
    ) {
        if let make {
            request.body = make(members.map { (key: $0.id.description, body: Data($0.body)) })
        } else {
            var body = [UInt8]("[".utf8)
            for (n, member) in members.enumerated() {
                body += Array((n == 0 ? "" : ",").utf8) + Array("{\"key\":\"\(member.id)\",\"body\":".utf8)
                body += member.body + [UInt8(ascii: "}")]
            }
            request.body = Data(body + [UInt8(ascii: "]")])
        }
        request.batch = members.map(\.id)
        // FNV-1a, twice (two offset bases), over the sorted ids: stable across processes and
        // versions, unlike `Hasher`; 128 bits, so two batches never share a key by chance.
        let ids = Array(request.batch.map(\.description).sorted().joined(separator: ",").utf8)
        let halves = [0xcbf2_9ce4_8422_2325 as UInt64, 0x6c62_272e_07bb_0142].map { basis in
            ids.reduce(basis) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
        }
        request.headers["Idempotency-Key"] = "batch-" + halves.map { String($0, radix: 16) }.joined(separator: "-")
    }

    /// The one outcome path, for both runners. Outside any lock, the server's `Retry-After` is
    /// read (once, for the message and its destination) and two random values are drawn from the
    /// app's source, which no lock may call: the jitter's and the probe delay's. Then, in **one
    /// critical section**, the one rule (`NextDue`) judges the outcome, which is logged and
    /// applied to the projection, the attempt's slot (or the hand-off) is freed, and the
    /// scheduler's next plan is carried out.
    ///
    /// It runs on the thread that heard the outcome: an append is a write(2) into the page
    /// cache, as `send` makes on the app's thread, and never waits for the disk (a segment
    /// roll renames a file prepared ahead: `WriteAheadLog.SegmentPreparation`). Under
    /// `durability: .always` it blocks for the record's fsync before its effects run and the
    /// next plan: call it where blocking is allowed then (`recordWhereAllowed`).
    func record(_ ending: Ending) -> Reply {
        let instant = currentInstant()
        var ending = ending
        ending.retryAfter = configuration.retry.retryAfter(
            of: ending.outcome, now: Date(timeIntervalSince1970: Double(instant.wallMilliseconds) / 1000))
        (ending.random, ending.probeRandom) = (configuration.random(), configuration.random())
        for r in ending.riders.indices {
            (ending.riders[r].retryAfter, ending.riders[r].random) = (ending.retryAfter, configuration.random())
        }
        let effects = core.handle(.ended(ending), at: instant)
        effects.run()
        let what = if case .engine = ending.runner { "attempt" } else { "background upload" }
        configuration.logger.debug(
            "\(what) ended: \(ending.outcome) → \(effects.reply.verdict.map { "\($0)" } ?? "dropped (message gone)")",
            metadata: Self.metadata(ending.attempt, url: ending.url))
        return effects.reply
    }

    /// A background upload that ended without an outcome to judge (`UploadEnd`).
    func record(_ end: UploadEnd) -> Reply {
        core.handle(.uploadEnded(end), at: currentInstant()).run()
    }

    /// `record` from a runner, a task of the cooperative pool: under `durability: .always` it
    /// moves to `readQueue` (concurrent, so runners' fsyncs are shared), where blocking is allowed.
    func recordWhereAllowed(_ ending: Ending) async -> Reply {
        guard configuration.durability == .always else { return record(ending) }
        return await onIOQueue(readQueue) { [self] in record(ending) }
    }

    /// The metadata of an attempt's log lines (never headers or the body).
    static func metadata(_ attempt: Attempt, url: String?) -> Logging.Logger.Metadata {
        var metadata: Logging.Logger.Metadata = [
            "courier.message-id": "\(attempt.id)", "courier.attempt": "\(attempt.number)"
        ]
        if let url { metadata["courier.destination"] = "\(url)" }
        return metadata
    }
}

/// The engine's runner: a task per delivery slot in use. It makes the attempt the scheduler
/// gave it (reads the message back, prepares and sends the request, records the outcome on the
/// thread that heard it, through the outcome path above, shared with background uploads),
/// then the next one the scheduler gives it, until there is none. It hops to the I/O queue
/// only for blocking work: a compaction.
extension Courier {
    /// Runs `first`, then each attempt the scheduler gives this runner as one ends. Ends when
    /// it gives none (nothing due, paused, stopping, closed), or when the task is cancelled:
    /// `close()` and `deliverPending` cancel runners, and the plan stops giving them attempts.
    func runAttempts(from first: Attempt, token: UInt64) async {
        var next: Attempt? = first
        var turns = 0
        // Each turn makes one attempt the scheduler took for this runner: the loop ends with them.
        while let attempt = next {
            next = await run(attempt, token: token)
            turns += 1
            // A transport that answers without suspending (a test double, a request that fails
            // before it is sent) would keep this thread to itself: other work gets a turn now
            // and then.
            if turns % Self.turnsBeforeYield == 0 { await Task.yield() }
        }
    }

    /// Attempts a runner makes in a row before it yields (every real transport suspends in
    /// each; a test double may not).
    static let turnsBeforeYield = 32

    /// One attempt: read the message back, POST it, record what happened.
    /// - Returns: the attempt this runner makes next, if the scheduler gave it one.
    private func run(_ attempt: Attempt, token: UInt64) async -> Attempt? {
        let state: MessageState
        let due = { NextDue.afterUnreadableRecord(policy: self.configuration.retry, nowMilliseconds: $0) }
        switch await readState(of: attempt.id, kept: attempt.message) {
        case .success(let loaded?):
            state = loaded
        case .success(nil):
            // Cancelled (`cancel(_:)`) before its state was read: nothing to send. The slot
            // is free for the next due message.
            leave(attempt.riders.map(\.id))
            return carryOn(.runnerFree(token: token, continuing: !Task.isCancelled))
        case .failure(let error):
            leave(attempt.riders.map(\.id))
            return carryOn(
                .unreadable(
                    attempt.id, error, dueMilliseconds: due(currentInstant().wallMilliseconds), token: token,
                    continuing: !Task.isCancelled))
        }
        let riders = await readRiders(of: attempt, after: state, unreadableDue: due)
        configuration.logger.debug("attempt starting", metadata: Self.metadata(attempt, url: state.url))
        let (outcome, answer): (DeliveryOutcome, ServerAnswer?)
        switch await preparedRequest(for: state, attempt: attempt.number, riders: riders.map(\.1)) {
        case .success(let request):
            (outcome, answer) = await Signposts.interval("attempt") { await transport.exchange(request) }
        case .failure(let failure): (outcome, answer) = (.failure(failure), nil)
        }
        if case .failure(let f) = outcome, f.kind == .cancelled {
            // Cancelled by close(), or at the end of `deliverPending`: not an attempt. The
            // message is pending, exactly as on disk. The runner ends: a transport that says
            // "cancelled" of its own accord (a dead process's, in the simulation) would have
            // it take the same message again at once, in a loop.
            leave(riders.map(\.0.id))
            return carryOn(.attemptCancelled(attempt.id, token: token))
        }
        // At most half a record: a `delivered` record too large to append would leave the
        // message to be sent again after a restart.
        let bodyBytes = min(ServerAnswer.maximumBodyBytes, maximumRecordBytes / 2 - 1024)
        let kept = outcome.isSuccess ? answer?.keeping(configuration.answerHeaders, bodyBytes: bodyBytes) : nil
        var statuses: [MessageID: Int]?
        if !riders.isEmpty, outcome.isSuccess, let answer, let decode = configuration.batchItemStatuses {
            statuses = decode(answer, [attempt.id] + riders.map(\.0.id))
        }
        func ending(_ attempt: Attempt, _ state: MessageState) -> Ending {
            let own = statuses?[attempt.id].map { DeliveryOutcome.response(status: $0) }
            return Ending(
                attempt: attempt, outcome: outcome, createdMilliseconds: state.createdMilliseconds,
                expiryMilliseconds: state.expiryMilliseconds, runner: .engine(token: token), url: state.url,
                continuing: !Task.isCancelled, answer: own?.isSuccess == false ? nil : kept, itemOutcome: own)
        }
        var ended = ending(attempt, state)
        ended.riders = riders.map(ending).map { rider in
            var rider = rider
            if let own = rider.itemOutcome { rider.outcome = own }
            return rider
        }
        return await recordWhereAllowed(ended).next
    }

    /// The batch's other messages that go (`Attempt.riders`), read back, within
    /// `Batching.maximumBytes` with `first`, told to the core (they start); the others are the
    /// engine's again: one cancelled meanwhile is gone, one that cannot be read is said and tried
    /// again later.
    private func readRiders(
        of attempt: Attempt, after first: MessageState, unreadableDue due: (UInt64) -> UInt64
    ) async -> [(Attempt, MessageState)] {
        guard !attempt.riders.isEmpty else { return [] }
        let limit = configuration.options(for: first.url)?.batching?.maximumBytes ?? .max
        var going: [(Attempt, MessageState)] = [], left: [MessageID] = []
        var unreadable: [(MessageID, LogError)] = [], bytes = first.body.count
        for rider in attempt.riders {
            switch await readState(of: rider.id, kept: rider.message) {
            case .success(let state?) where bytes + state.body.count <= limit:
                bytes += state.body.count
                going.append((rider, state))
            case .success(_?): left.append(rider.id)
            case .success(nil): break
            case .failure(let error): unreadable.append((rider.id, error))
            }
        }
        let input = CoreInput.batchFormed(
            going: going.map(\.0), left: left, unreadable: unreadable,
            dueMilliseconds: due(currentInstant().wallMilliseconds))
        core.handle(input, at: currentInstant()).run()
        return going
    }

    /// Batch members that do not go after all: schedulable again.
    private func leave(_ ids: [MessageID]) {
        guard !ids.isEmpty else { return }
        core.handle(.batchFormed(going: [], left: ids, unreadable: [], dueMilliseconds: 0), at: currentInstant()).run()
    }

    /// Tells the core `input` about this runner's slot; the attempt it makes next, if any.
    private func carryOn(_ input: CoreInput) -> Attempt? {
        core.handle(input, at: currentInstant()).run().next
    }
}

// The values one attempt's round passes along: what the scheduler took (`Attempt`) and how it
// ended (`Ending`), told to the core as a `CoreInput` with what was gathered of it outside the
// core's lock; what recording it answers is the core's `Reply`, in its `Effects`.

/// One attempt the engine is to make: which message, and which attempt of it.
struct Attempt: Sendable {
    var id: MessageID
    var number: Int
    /// When it was taken (wall ms): its outcome says nothing new to the concurrency policy if
    /// the policy cut the limit since. Nil for a background upload, whose latency says nothing
    /// (the system chose when it ran).
    var startedMilliseconds: UInt64?
    /// Its full state, if the core kept it in memory when the attempt was taken (in the same
    /// critical section): the runner then neither reads the log nor takes the lock again. The
    /// attempt is in flight from that moment, so a `cancel` after it lets this POST go, as
    /// `cancel` documents for an attempt in flight (its outcome is ignored).
    var message: MessageState? = nil
    /// The messages that go in the same request (`Batching`), in body order after this one.
    var riders: [Attempt] = []
}

/// How an attempt or an upload ended, to record (`Courier.record(_:)`).
struct Ending: Sendable {
    var attempt: Attempt
    var outcome: DeliveryOutcome
    /// When the message was created (wall ms): `RetryPolicy.expiry` judges by its age.
    var createdMilliseconds: UInt64
    /// The message's own expiry (`send(…expiry:)`), in ms, if it has one.
    var expiryMilliseconds: UInt64?
    var runner: Runner
    /// The destination, for the log line (nil: not read, as for a delivered upload).
    var url: String?
    /// Whether the engine's runner may make the next attempt (its task is not cancelled).
    var continuing = false
    /// A 2xx's answer, as Courier keeps it (`ServerAnswer.keeping`), if the transport gave one.
    var answer: ServerAnswer?
    /// The message's own outcome in a batch whose 2xx answer says how each message went
    /// (`Configuration.batchItemStatuses`): what the retry policy judges (a rider's `outcome` is
    /// its own already); the destination is told `outcome`, the request's.
    var itemOutcome: DeliveryOutcome?
    /// Gathered by `Courier.record` outside the core's lock (no lock may call the app's
    /// clock or random source): the server's `Retry-After`, read once for the message and its
    /// destination and clamped (`RetryPolicy.retryAfter(of:now:)`); the seed of the jitter
    /// (`NextDue`); that of the probe delay, if the attempt was its destination's probe
    /// (`Governor`).
    var retryAfter: Duration?
    var random: UInt64 = 0
    var probeRandom: UInt64 = 0
    /// How the attempts of the batch's other messages ended (`Attempt.riders`): as this one.
    var riders: [Ending] = []

    /// Who made the attempt.
    enum Runner: Sendable {
        /// The engine, in the delivery slot of this token.
        case engine(token: UInt64)
        /// A background upload task, of the hand-off with this ticket.
        case upload(ticket: UInt64)
    }
}

/// Intervals for Instruments' *Points of Interest*: opening a courier (the replay), each
/// `send`, and each attempt's request, on Apple platforms (`OSSignposter`, subsystem
/// `CourierKit`). Nothing elsewhere. On Apple platforms an interval costs next to nothing while
/// no trace records it (the signposter checks that first).
enum Signposts {
    #if canImport(os)
    // Why `nonisolated(unsafe)`: `OSSignposter` is made to be used from any thread (Apple's
    // documentation), but the SDK does not mark it `Sendable`. Written once, here.
    nonisolated(unsafe) static let signposter = OSSignposter(subsystem: "CourierKit", category: .pointsOfInterest)
    #endif

    /// Runs `body` inside an interval named `name`.
    static func interval<T, E: Error>(_ name: StaticString, _ body: () throws(E) -> T) throws(E) -> T {
        #if canImport(os)
        let state = signposter.beginInterval(name, id: signposter.makeSignpostID())  // overlapping: own ids
        defer { signposter.endInterval(name, state) }
        #endif
        return try body()
    }

    /// Runs `body` inside an interval named `name`, across its suspensions.
    static func interval<T>(_ name: StaticString, _ body: () async -> T) async -> T {
        #if canImport(os)
        let state = signposter.beginInterval(name, id: signposter.makeSignpostID())  // overlapping: own ids
        defer { signposter.endInterval(name, state) }
        #endif
        return await body()
    }
}

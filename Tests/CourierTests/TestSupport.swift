@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation

let wallStart = Date(timeIntervalSince1970: 1_763_740_800)  // 2025-11-21T16:00:00Z
let inbox = URL(string: "https://example.com/inbox")!

/// A temporary directory that removes itself.
final class TemporaryDirectory: @unchecked Sendable {
    let url: URL
    init() {
        url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-\(UUID().uuidString)")
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Deterministic configuration: manual clock, fixed wall time, seeded jitter, sequential ids.
func testConfiguration(clock: ManualClock, transport: any DeliveryTransport,
                       jitter: RetryPolicy.Jitter = .none) -> Courier.Configuration {
    var c = Courier.Configuration()
    c.clock = clock
    c.now = { wallStart }
    c.transport = transport
    c.random = SeededRandomSource(seed: 42).next
    c.makeMessageID = SequentialMessageIDs().next
    c.retry = RetryPolicy(jitter: jitter)
    c.durability = .never
    c.allowsPurgeableDirectory = true  // `TemporaryDirectory` is in tmp
    return c
}

extension Courier.Configuration {
    /// 4 KiB segments (the smallest the format allows), so a test rolls and compacts after a
    /// few dozen messages; messages up to 1 KiB, which such a segment always holds.
    mutating func useSmallestSegments() {
        segmentSizeBytes = 4096
        maximumMessageBytes = 1024
    }
}

extension Courier {
    /// Sends `bodies` in order, each once the log's roll work so far is done. A courier prepares
    /// its next segment off the core's lock, so under load (a busy CI machine) a segment grows
    /// past its size until the spare is ready; a test that counts or damages segments needs
    /// each to roll at its size, run after run.
    @discardableResult
    func sendRollingAtSegmentSize(_ bodies: [[String: Any]], to url: URL) throws -> [MessageID] {
        try bodies.map { body in
            let id = try send(body, to: url)
            log.waitForRollWork()
            return id
        }
    }
}

/// Reopens `directory` with `configuration` and a transport that holds every request, so
/// nothing is delivered meanwhile; returns the pending ids and what recovery said, then closes.
func pendingAfterReopen(_ directory: URL, _ configuration: Courier.Configuration) async throws
    -> (ids: Set<MessageID>, isClean: Bool, summary: String)
{
    var reopen = configuration
    let held = ScriptedTransport()
    held.holdResponses = true
    reopen.transport = held
    let survivor = try Courier(directory: directory, configuration: reopen)
    let pending = await Set(survivor.pendingMessages().map(\.id))
    let recovery = survivor.recovery
    await survivor.close()
    return (pending, recovery.isClean, recovery.summary)
}

extension Projection {
    /// The next message, or nil: `take` of one.
    mutating func takeNext(_ start: Start, nowMilliseconds now: UInt64) -> Taken? {
        take(start, limit: 1, nowMilliseconds: now).first
    }

    /// Tells slot `i`'s destination what its attempt said, as the core does (`observe(_:ofSlot:)`
    /// with the attempt's `Ending`); `random` seeds the probe delay.
    mutating func observe(
        _ outcome: DeliveryOutcome, ofSlot i: UInt32, startedMilliseconds: UInt64?, retryAfter: Duration?,
        random: UInt64, nowMilliseconds now: UInt64
    ) -> Governor.Change {
        let attempt = Attempt(id: slots[Int(i)].id, number: 1, startedMilliseconds: startedMilliseconds)
        let ending = Ending(
            attempt: attempt, outcome: outcome, createdMilliseconds: 0, runner: .engine(token: 0),
            retryAfter: retryAfter, probeRandom: random)
        return observe(ending, ofSlot: i, nowMilliseconds: now)
    }
}

extension Courier {
    /// Attempts in flight right now (for tests).
    var inFlightCount: Int { core.diagnostics.attemptsUnderWay }
    /// Messages taken for a delivery (an attempt or an upload) and not yet ended.
    var sendingCount: Int { core.diagnostics.sending }
    /// Every pending message's full state: read back from the log, with the attempt count and
    /// due time the projection holds.
    var scheduledStates: [MessageID: MessageState] {
        let ids = core.pendingIDs
        return Dictionary(uniqueKeysWithValues: ids.compactMap { id in (try? core.loadState(id))?.map { (id, $0) } })
    }
}

/// The replay rules as a plain dictionary: the oracle the projection is checked against.
struct ReferenceProjection {
    var states: [MessageID: MessageState] = [:]

    mutating func apply(_ event: Event) {
        switch event {
        case .enqueued(let s), .snapshot(let s): states[s.id] = s
        case .attempted(let id, let attempt, _, let due):
            guard states[id] != nil else { return }
            states[id]!.attempts = max(states[id]!.attempts, attempt)
            states[id]!.nextDueMilliseconds = due
        case .delivered(let id, _, _, _, _), .abandoned(let id, _, _), .cancelled(let id): states[id] = nil
        case .handedOff, .held, .released: break  // the projection's schedule, not the message's state
        }
    }
}

/// Collects events from a stream in the background.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [CourierEvent] = []
    private var task: Task<Void, Never>?

    init(_ stream: AsyncStream<CourierEvent>) {
        task = Task { for await e in stream { self.lock.withLock { self.items.append(e) } } }
    }
    var events: [CourierEvent] { lock.withLock { items } }
    func finish() async { await task?.value }
}

extension Event {
    /// The message id of a record body, without decoding the rest: the version byte, then the
    /// id's 16 bytes (what the tests check of bodies they did not decode).
    static func messageID(in body: [UInt8]) -> MessageID? {
        guard body.count >= 17, body[0] == version else { return nil }
        return body.withUnsafeBytes { MessageID(UUID(uuid: $0.loadUnaligned(fromByteOffset: 1, as: uuid_t.self))) }
    }
}

/// A `RandomNumberGenerator` over a closure (a seeded source's `next`).
struct ClosureRandom: RandomNumberGenerator {
    let source: @Sendable () -> UInt64
    mutating func next() -> UInt64 { source() }
}

extension Projection {
    /// What an event did to the projection.
    enum Change: Equatable { case added, updated, ended, ignored }

    /// Applies a decoded event, as replay does (tests build states so).
    @discardableResult
    mutating func apply(_ event: Event, address: RecordAddress) -> Change {
        switch event {
        case .enqueued(let s), .snapshot(let s):
            let replaced = replaced(by: s.replacing, id: s.id)
            let added = applyFullState(
                id: s.id, url: s.url, orderingKey: s.orderingKey, tags: s.tags, replacing: s.replacing,
                attempts: s.attempts, dueMilliseconds: s.nextDueMilliseconds, address: address)
            if let replaced { applyEnd(id: replaced) }
            return added ? .added : .updated
        case .attempted(let id, let attempt, let outcome, let due):
            let pending = applyAttempt(
                id: id, attempt: attempt, dueMilliseconds: due, retryAfter: outcome.carriesRetryAfter)
            return pending ? .updated : .ignored
        case .delivered(let id, _, _, _, _), .abandoned(let id, _, _), .cancelled(let id):
            return applyEnd(id: id) ? .ended : .ignored
        case .handedOff: return .ignored  // the core keeps hand-offs (`CoreState.handOffs`)
        case .held(let tag):
            holdTag(tag)
            return .updated
        case .released(let tag):
            releaseTag(tag)
            return .updated
        }
    }
}

/// A courier on a simulated disk that a test cuts the power of (`SimulatedFileSystem.crash()`),
/// with 4 KiB segments and a transport that never answers (nothing leaves by delivery).
func openForPowerCut(_ fs: SimulatedFileSystem, _ durability: Courier.Durability) throws -> Courier {
    let held = ScriptedTransport()
    held.holdResponses = true
    var config = testConfiguration(clock: ManualClock(), transport: held)
    config.fileSystem = fs
    config.useSmallestSegments()
    config.durability = durability
    return try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
}

extension MessageLog {
    /// Waits, on a thread of its own polling every millisecond (bounded: 10 s), until every
    /// record appended so far is on stable storage (`.interval`'s sync came).
    func waitUntilDurable() async {
        let last = nextSequence - 1
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                for _ in 0..<10_000 where self.durableSequence < last { usleep(1_000) }
                done.resume()
            }.start()
        }
    }
}

/// `body` on a thread of its own, for a call that may block (an fsync the test paused): never
/// on one of the cooperative pool's few threads, which a blocked test would take from the suite.
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { done in Thread { done.resume(returning: body()) }.start() }
}

func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { done in Thread { done.resume(with: Result(catching: body)) }.start() }
}

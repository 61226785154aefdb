@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// Every public call that logs a record, under each durability setting, against a power cut
/// (`SimulatedFileSystem.crash()`: every byte not fsynced is gone), in a debug build (the
/// core's assertions are on):
/// - once the call has returned, or its outcome been seen, and the setting's sync has come
///   (`.always`: at once; `.interval`: its sync; `.never`: its segment sealed), its record
///   survives the cut;
/// - under `.always`, while its record waits for its fsync, nothing of it is seen: no event and
///   no attempt comes before a marker the test emits then, and a cut there undoes it whole.
@Suite(.timeLimit(.minutes(2))) struct DurabilityTableTests {
    enum Call: String, CaseIterable, Sendable {
        case send, replace, drop, cancel, cancelTagged, cancelAll, hold, release, delivered, failed, abandoned, handOff
        case collection
    }

    static let settings: [Courier.Durability] = [.always, .interval(.milliseconds(20)), .never]

    @Test(arguments: Call.allCases, settings)
    func aReturnedCallsRecordSurvivesAPowerCut(call: Call, durability: Courier.Durability) async throws {
        let table = try Table(call, durability)
        let prepared = try await table.prepare()
        let id = try await table.act(prepared)
        switch durability {
        case .always: break
        case .interval: await table.courier.log.waitUntilDurable()
        case .never: try table.sealTheActiveSegment()
        }
        let after = try table.recordsAfterPowerCut()
        #expect(after.contains { call.logged($0, id) }, "\(call) under \(durability): its record did not survive")
        _ = table.courier
    }

    @Test(arguments: Call.allCases)
    func underAlwaysNothingOfACallIsSeenBeforeItsRecordIsDurable(call: Call) async throws {
        let table = try Table(call, .always)
        let prepared = try await table.prepare()
        try await table.mark("before")
        // The call blocks in its fsync: on a thread of its own, never one of the cooperative
        // pool's (two cores: two blocked tests would stall the suite).
        let acting = Task { try? await table.act(prepared, pausingSyncs: true) }
        try #require(await table.fs.waitForAPausedSync(), "\(call) waits for its fsync")
        try await table.mark("after")
        let seen = table.events.events.drop { $0 != Table.marker("before") }.prefix { $0 != Table.marker("after") }
        #expect(!seen.contains { call.concerns($0, prepared) }, "\(call): seen before its record was durable: \(seen)")
        let after = try table.recordsAfterPowerCut()
        let subject = [.send, .replace, .collection].contains(call) ? nil : prepared  // nil: a new message
        #expect(
            !after.contains { call.logged($0, subject, besides: prepared) },
            "\(call): the cut came before its fsync")
        _ = await acting.value
        _ = table.courier
    }
}

extension DurabilityTableTests.Call {
    /// The record the call logs.
    var kind: RecordKind {
        switch self {
        case .send, .replace, .collection: .enqueued
        case .drop: .abandoned
        case .cancel, .cancelTagged, .cancelAll: .cancelled
        case .hold: .held
        case .release: .released
        case .delivered: .delivered
        case .failed: .attempted
        case .abandoned: .abandoned
        case .handOff: .handedOff
        }
    }

    /// Whether a record is the call's: of its kind, and of message `id` (nil: of any message
    /// but `besides`; a tag's record names no message).
    func logged(_ record: (kind: RecordKind, id: MessageID?), _ id: MessageID?, besides: MessageID? = nil) -> Bool {
        guard record.kind == kind else { return false }
        guard let recordID = record.id else { return true }
        return id.map { recordID == $0 } ?? (recordID != besides)
    }

    /// Whether `event` shows the call's state change: of the prepared message `id`, or (a send)
    /// of another.
    func concerns(_ event: CourierEvent, _ id: MessageID) -> Bool {
        let subject: MessageID? =
            switch event {
            case .enqueued(let m), .cancelled(let m), .attemptStarted(let m, _), .delivered(let m, _),
                .failed(let m, _, _, _), .abandoned(let m, _, _), .handedOff(let m, _):
                m
            default: nil
            }
        guard let subject else { return false }
        switch self {
        case .send, .collection: return subject != id
        case .replace, .drop: return true  // the new message's, and the one it withdraws
        case .delivered, .failed, .abandoned:
            // The attempt itself started before; its outcome, or a next attempt, must wait.
            if case .attemptStarted(_, 1) = event { return false }
            return subject == id
        default: return subject == id
        }
    }

    var isOutcome: Bool { [.delivered, .failed, .abandoned].contains(self) }

    /// Whether `event` says the outcome of message `id`'s attempt was recorded.
    func isOutcome(_ event: CourierEvent, of id: MessageID) -> Bool {
        switch (self, event) {
        case (.delivered, .delivered(id, _)), (.failed, .failed(id, _, _, _)), (.abandoned, .abandoned(id, _, _)): true
        default: false
        }
    }

    /// What the server answers each attempt.
    var answer: DeliveryOutcome {
        switch self {
        case .failed: .response(status: 500)
        case .abandoned: .response(status: 400)
        default: .response(status: 200)
        }
    }
}

/// One row of the table: a courier on a simulated file system, set up for the call.
final class Table: Sendable {
    static let outbox = URL(fileURLWithPath: "/group/ExtensionOutbox")
    let call: DurabilityTableTests.Call
    let fs = SimulatedFileSystem()
    let courier: Courier
    let transport: ScriptedTransport
    let session = RecordingSession()
    /// Set while the call is under test with its fsyncs to pause: the server or the session
    /// pauses them right before the call's record (an outcome's, a hand-off's) is appended.
    let pausesAtTheCall = Locked(false)
    let events: EventLog

    init(_ call: DurabilityTableTests.Call, _ durability: Courier.Durability) throws {
        self.call = call
        let fs = fs, pauses = pausesAtTheCall, answer = call.answer
        transport = ScriptedTransport { _ in
            if pauses.withLock({ $0 }) { fs.pauseSyncs() }
            return answer
        }
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.fileSystem = fs
        config.useSmallestSegments()
        // The compactor may forget a resolved message's records once their segment is sealed,
        // as it should: this table is about durability, not retention (under a slow run, the
        // seal's compaction came before the cut and took the `delivered` row's record).
        config.isCompactionEnabled = false
        config.durability = durability
        if call == .collection { config.extensionOutboxDirectory = Self.outbox }
        if call == .drop { (config.maximumPendingMessages, config.whenFull) = (1, ["t": .dropOldest]) }
        config.retry = RetryPolicy(
            initialDelay: .seconds(3600), jitter: .none, maximumAttempts: call == .abandoned ? 1 : nil)
        if call.isOutcome {
            config.concurrencyLimit = .fixed
            config.maximumConcurrentDeliveries = 1
        }
        if call == .handOff {
            config.backgroundUploads = Courier.BackgroundUploads(session: session)
            session.onMake = { if pauses.withLock({ $0 }) { fs.pauseSyncs() } }
        }
        courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        events = EventLog(courier.events())
    }

    /// The state before the call, durable: one message, tagged and holding replacement key "k";
    /// for `release` held, else with the engine paused where it would deliver the message before
    /// the call (an outcome resumes it).
    func prepare() async throws -> MessageID {
        await courier.core.status.reconciliation?.value  // with hand-off: its plan comes first
        if call == .release { courier.hold(tagged: "t") } else if call != .send { courier.pause() }
        if call == .collection { await courier.collectExtensionMessages() }  // the open's, first
        let id = try courier.send(["n": 1], to: inbox, tags: ["t"], replacing: "k")
        // An outcome's: a second message waits for the one delivery slot, so the plan after the
        // outcome starts it (and a plan yields the events of its section first).
        if call.isOutcome { _ = try courier.send(["n": 0], to: inbox) }
        courier.log.waitForRollWork()
        try courier.log.sync()
        return id
    }

    /// Makes the call and returns the message its record names (a send's new one): once the
    /// call returned, or once its outcome was seen. With `pausingSyncs`, fsyncs stop right
    /// before the call's record.
    func act(_ id: MessageID, pausingSyncs: Bool = false) async throws -> MessageID {
        let direct = !call.isOutcome && call != .handOff && call != .collection
        if pausingSyncs && direct { fs.pauseSyncs() } else { pausesAtTheCall.withLock { $0 = pausingSyncs } }
        var count = 1
        switch call {
        case .send: return try await onThread { [courier] in try courier.send(["n": 2], to: inbox) }
        case .replace: return try await onThread { [courier] in try courier.send(["n": 2], to: inbox, replacing: "k") }
        case .drop: _ = try await onThread { [courier] in try courier.send(["n": 2], to: inbox, tags: ["t"]) }
        case .collection:
            let sent = try ExtensionOutbox(
                directory: Self.outbox, fileSystem: fs, fileProtection: .completeUntilFirstUserAuthentication,
                setProtection: { _, _ in }, suspensionGuard: .none
            ).send(["n": 2], to: inbox)
            if pausingSyncs { fs.pauseSyncs() }  // the outbox's own fsync went before
            count = await courier.collectExtensionMessages()
            guard count == 1 else { throw Unexpected(what: "collected \(count) messages, not 1") }
            return sent
        case .cancel: count = await onThread { [courier] in courier.cancel(id) ? 1 : 0 }
        case .cancelTagged: count = await onThread { [courier] in courier.cancel(tagged: "t") }
        case .cancelAll: count = await onThread { [courier] in courier.cancelAll() }
        case .hold: count = await onThread { [courier] in courier.hold(tagged: "t") }
        case .release: count = await onThread { [courier] in courier.release(tagged: "t") }
        case .delivered, .failed, .abandoned:
            courier.resume()
            // Bounded: the attempt and its outcome take a few scheduler turns.
            for _ in 0..<5_000 where !events.events.contains(where: { call.isOutcome($0, of: id) }) {
                try await Task.sleep(for: .milliseconds(1))
            }
        case .handOff:
            count = await courier.appDidEnterBackground()
        }
        guard count == 1 else { throw Unexpected(what: "\(call) concerned \(count) messages, not 1") }
        return id
    }

    struct Unexpected: Error { var what: String }

    /// An event no call emits, to mark a moment in the stream.
    static func marker(_ name: String) -> CourierEvent { .storageFailed(CourierError(.storageFailed, name)) }

    /// Emits `marker(name)` and returns once the stream has it (so it has everything before it).
    func mark(_ name: String) async throws {
        // Compaction is off here: the end of one that never began only emits its error.
        courier.core.handle(.compactionEnded(error: CourierError(.storageFailed, name))).run()
        // Bounded: the reader takes it within a few scheduler turns.
        for _ in 0..<5_000 where !events.events.contains(Self.marker(name)) {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// `.never`: sends until the active segment is sealed (synced as it is).
    func sealTheActiveSegment() throws {
        let segments = courier.log.segmentNames.count
        // Bounded: a 4 KiB segment rolls within a few dozen of these sends.
        for _ in 0..<2_000 where courier.log.segmentNames.count <= segments {
            // At `.drop`'s bound of one, each drops the one before.
            _ = try courier.send(
                ["pad": String(repeating: "x", count: 100)], to: inbox, tags: call == .drop ? ["t"] : [])
        }
        courier.log.waitForRollWork()
    }

    /// Cuts the power, then reads every record the log kept: its kind and message id.
    func recordsAfterPowerCut() throws -> [(kind: RecordKind, id: MessageID?)] {
        fs.crash()
        var records: [(kind: RecordKind, id: MessageID?)] = []
        _ = try LogReader(directory: "/c", fileSystem: fs).read { view in
            let record = view.record()
            records.append((record.kind, Event.messageID(in: record.body)))
        }
        return records
    }
}

/// A background session that makes tasks and never ends them (`onMake` runs as each is made),
/// and keeps the requests.
final class RecordingSession: BackgroundUploadSession, @unchecked Sendable {
    private let made = Locked<[BackgroundUploadTask]>([])
    let requests = Locked<[BackgroundUploadRequest]>([])
    var onMake: @Sendable () -> Void = {}

    func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask {
        onMake()
        requests.withLock { $0.append(request) }
        return made.withLock {
            let task = BackgroundUploadTask(identifier: $0.count + 1, taskDescription: request.taskDescription)
            $0.append(task)
            return task
        }
    }
    func outstandingTasks() async -> [BackgroundUploadTask] { made.withLock { $0 } }
    func cancel(_ task: BackgroundUploadTask) {}
    func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void) {}
}

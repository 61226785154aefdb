@_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// Background hand-off against the simulated system: delivery goes on while the app is
/// suspended, and nothing acknowledged is lost whatever the order of events.
@Suite(.timeLimit(.minutes(1))) struct BackgroundHandOffTests {
    /// A server that records every request and answers from `answer` (by attempt number of
    /// that message, counted by the server).
    final class Server: @unchecked Sendable {
        let transport: ScriptedTransport
        init(
            _ answer: @escaping @Sendable (DeliveryRequest, Int) -> DeliveryOutcome = { _, _ in .response(status: 200) }
        ) {
            let counts = Counts()
            transport = ScriptedTransport { request in answer(request, counts.next(request.messageID)) }
        }
        final class Counts: @unchecked Sendable {
            let lock = NSLock()
            var seen: [MessageID: Int] = [:]
            func next(_ id: MessageID) -> Int {
                lock.lock(); defer { lock.unlock() }
                seen[id, default: 0] += 1
                return seen[id]!
            }
        }
    }

    static func configuration(bound: Int = 100) -> Courier.Configuration {
        var c = Courier.Configuration()
        c.allowsPurgeableDirectory = true
        c.random = SeededRandomSource(seed: 7).next
        c.makeMessageID = SequentialMessageIDs().next
        c.retry = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(64), jitter: .none)
        c.durability = .never
        c.backgroundUploads = Courier.BackgroundUploads(session: Unused())
        c.backgroundUploads?.maximumOutstandingTasks = bound
        // Up to 64 uploads per destination at once, whatever it answers: these tests are about
        // the hand-off's mechanics; its adaptive limit is tested in AdaptiveDeliveryTests and
        // the property test.
        c.concurrencyLimit = .fixed
        return c
    }

    /// Replaced by the simulation's session (`SimulatedBackgroundSystem.configure`).
    struct Unused: BackgroundUploadSession {
        func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask { fatalError("unused") }
        func outstandingTasks() async -> [BackgroundUploadTask] { [] }
        func cancel(_ task: BackgroundUploadTask) {}
        func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void) {}
    }

    @Test func handedOffMessagesAreDeliveredWhileTheAppIsSuspended() async throws {
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        let courier = try #require(app.courier)
        courier.pause()  // nothing goes before the app leaves the screen
        let ids = (0..<5).compactMap { app.send("m\($0)", to: inbox) }
        await app.enterBackground()
        #expect(courier.handedOffCount == 5)
        #expect(app.system.outstandingCount == 5)
        #expect(app.fileSystem.allPaths().filter { $0.hasSuffix(".body") }.count == 5)
        await app.system.advance(by: .seconds(60))
        #expect(app.system.appState == .suspended)
        #expect(app.system.statistics.wakes == 1)
        #expect(courier.pendingCount == 0)
        #expect(Set(server.transport.requests.map(\.messageID)) == Set(ids))
        #expect(server.transport.requests.allSatisfy { $0.headers["Idempotency-Key"] == $0.messageID.description })
        #expect(
            app.fileSystem.allPaths().filter { $0.hasSuffix(".body") }.isEmpty,
            "a body file lives only while handed off")
        #expect(app.system.statistics.engineRequests == 0)
        var kinds: [RecordKind] = []
        _ = try LogReader(directory: app.directory.path, fileSystem: app.fileSystem).read { kinds.append($0.kind) }
        #expect(kinds.filter { $0 == .handedOff }.count == 5)
        #expect(kinds.filter { $0 == .delivered }.count == 5)
    }

    @Test func aMessageSentInTheBackgroundGoesToTheSessionNotTheEngine() async throws {
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        let courier = try #require(app.courier)
        #expect(await courier.appDidEnterBackground() == 0, "nothing was pending")
        let id = try #require(app.send("late", to: inbox))
        await courier.settle()
        #expect(courier.handedOffCount == 1, "the engine may be frozen at any moment in the background")
        await app.system.advance(by: .seconds(60))
        #expect(courier.pendingCount == 0)
        #expect(server.transport.requests.map(\.messageID) == [id])
        #expect(app.system.statistics.engineRequests == 0)
    }

    @Test func aFailedUploadIsHandedOffAgainToBeginAfterItsBackoff() async throws {
        let server = Server { _, n in n < 3 ? .response(status: 500) : .response(status: 200) }
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let id = try #require(app.send("hello", to: inbox))
        await app.enterBackground()
        var times: [Duration] = []
        for _ in 0..<120 {
            let before = server.transport.requests.count
            await app.system.advance(by: .milliseconds(500))
            if server.transport.requests.count > before { times.append(app.system.manualClock.now.offset) }
        }
        #expect(server.transport.requests.map(\.messageID) == [id, id, id])
        #expect(app.courier?.pendingCount == 0)
        // Backoff 1 s then 2 s from each failure, and the rate limiter's delay (1 s, then 2 s)
        // from the task's creation at the wake, 1 s after the failure: 2 s, then 3 s apart.
        #expect(times.count == 3)
        if times.count == 3 {
            #expect(times[1] - times[0] >= .seconds(1.5))
            #expect(times[2] - times[1] >= .seconds(2.5))
        }
        #expect(app.system.statistics.tasksCreated == 3)
    }

    /// `cancel` of a handed-off message ends its hand-off too: the system's task is cancelled
    /// and the body file goes (on the I/O queue, so it is waited for, bounded).
    @Test func cancellingAHandedOffMessageCancelsItsTaskAndRemovesItsBody() async throws {
        let server = Server { _, _ in .response(status: 500) }
        var config = Self.configuration()
        config.retry = RetryPolicy(initialDelay: .seconds(600), maximumDelay: .seconds(600), jitter: .none)
        let app = SimulatedApp(server: server.transport, configuration: config)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let id = try #require(app.send("hello", to: inbox))
        await app.enterBackground()
        let courier = try #require(app.courier)
        #expect(courier.handedOffCount == 1)
        let bodies = { app.fileSystem.allPaths().filter { $0.hasSuffix(".body") } }
        #expect(bodies().count == 1, "the hand-off wrote its body file")
        #expect(courier.cancel(id))
        #expect(app.system.statistics.tasksCancelled == 1, "cancel cancelled the task")
        // Bounded: 1,000 turns of 1 ms for the I/O queue to remove the file.
        for _ in 0..<1_000 where !bodies().isEmpty { try await Task.sleep(for: .milliseconds(1)) }
        #expect(bodies().isEmpty, "the body file is gone")
        #expect(courier.handedOffCount == 0)
    }

    /// `cancelAll()` at logout reaches the messages the system holds: every task is cancelled
    /// and every body file goes.
    @Test func cancelAllCancelsEveryHandedOffTaskAndRemovesTheirBodies() async throws {
        let server = Server { _, _ in .response(status: 500) }
        var config = Self.configuration()
        config.retry = RetryPolicy(initialDelay: .seconds(600), maximumDelay: .seconds(600), jitter: .none)
        let app = SimulatedApp(server: server.transport, configuration: config)
        app.hearsFirstAnswersBeforeSuspending = false
        await app.system.launch()
        app.courier?.pause()
        for text in ["a", "b", "c"] { _ = try #require(app.send(text, to: inbox)) }
        await app.enterBackground()
        let courier = try #require(app.courier)
        #expect(courier.handedOffCount == 3)
        #expect(courier.cancelAll() == 3)
        #expect(app.system.statistics.tasksCancelled == 3)
        let bodies = { app.fileSystem.allPaths().filter { $0.hasSuffix(".body") } }
        // Bounded: 1,000 turns of 1 ms for the I/O queue to remove the files.
        for _ in 0..<1_000 where !bodies().isEmpty { try await Task.sleep(for: .milliseconds(1)) }
        #expect(bodies().isEmpty && courier.handedOffCount == 0 && courier.cancelAll() == 0)
    }

    @Test func aRetryAfterIsHonouredWhileSuspended() async throws {
        let server = Server { _, n in n == 1 ? .response(status: 429, retryAfter: "120") : .response(status: 200) }
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        _ = try #require(app.send("hello", to: inbox))
        await app.enterBackground()
        await app.system.advance(by: .seconds(119))
        #expect(server.transport.requests.count == 1, "not before the server's 120 s")
        await app.system.advance(by: .seconds(120))
        #expect(server.transport.requests.count == 2)
        #expect(app.courier?.pendingCount == 0)
    }

    @Test func aDownDestinationGetsOneProbeAtATimeWhileSuspended() async throws {
        let server = Server { _, _ in .response(status: 503) }
        var configuration = Self.configuration()
        configuration.destinationBackoff = DestinationBackoff(failuresBeforeDown: 3)
        let app = SimulatedApp(server: server.transport, configuration: configuration)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        for i in 0..<20 { _ = app.send("m\(i)", to: inbox) }
        await app.enterBackground()
        await app.system.advance(by: .milliseconds(500))
        let afterFirstRound = server.transport.requests.count
        #expect(afterFirstRound == 20, "all were handed off before the destination was known down")
        await app.system.advance(by: .seconds(600))
        let probes = server.transport.requests.count - afterFirstRound
        #expect(probes >= 5 && probes <= 20, "one probe at a time, spaced by the policy: \(probes) in 10 minutes")
        #expect(app.system.outstandingCount <= 1)
        #expect(app.courier?.pendingCount == 20)
    }

    @Test func onlyTheHeadOfAnOrderingKeyIsHandedOffAndTheNextFollowsItsDelivery() async throws {
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        let courier = try #require(app.courier)
        courier.pause()
        let ids = try (0..<3).map { try courier.send(["n": $0], to: inbox, orderingKey: "chat") }
        await app.enterBackground()
        #expect(courier.handedOffCount == 1)
        await app.system.advance(by: .seconds(120))
        #expect(server.transport.requests.map(\.messageID) == ids)
        #expect(courier.pendingCount == 0)
    }

    @Test func forceQuitPutsHandedOffMessagesBackToPendingAtTheNextLaunch() async throws {
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let ids = (0..<3).compactMap { app.send("m\($0)", to: inbox) }
        await app.enterBackground()
        app.system.forceQuit()
        #expect(app.system.outstandingCount == 0)
        await app.system.advance(by: .seconds(600))
        #expect(server.transport.requests.isEmpty, "nothing continues after a force-quit")
        await app.system.launch()
        let courier = try #require(app.courier)
        #expect(courier.handedOffCount == 0)
        await courier.settle()
        for id in ids { try await courier.delivered(id) }
        #expect(Set(server.transport.requests.map(\.messageID)) == Set(ids))
        #expect(app.fileSystem.allPaths().filter { $0.hasSuffix(".body") }.isEmpty)
    }

    @Test func returningToTheForegroundCancelsTasksNotYetBegunAndNothingIsInFlightTwice() async throws {
        // m0 answers at once (the destination has answered, so the failed ones are all handed off
        // again); the others fail once.
        let server = Server { request, n in
            n == 1 && !String(decoding: request.body, as: UTF8.self).contains("m0")
                ? .response(status: 503) : .response(status: 200)
        }
        var configuration = Self.configuration()
        configuration.retry = RetryPolicy(initialDelay: .seconds(30), maximumDelay: .seconds(60), jitter: .none)
        let app = SimulatedApp(server: server.transport, configuration: configuration)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let ids = (0..<4).compactMap { app.send("m\($0)", to: inbox) }
        await app.enterBackground()
        await app.system.advance(by: .seconds(5))  // three failed once, handed off again for 30 s later
        let courier = try #require(app.courier)
        #expect(courier.handedOffCount == 3)
        await app.enterForeground()
        await app.system.advance(by: .seconds(1))
        await courier.settle()
        #expect(courier.handedOffCount == 0, "cancelled tasks bring their messages back")
        for id in ids { try await courier.delivered(id) }
        #expect(app.system.statistics.tasksCancelled == 3)
        #expect(app.system.statistics.inFlightTwice == 0)
        #expect(server.transport.requests.count == 7)
    }

    @Test func aTaskTheLogDoesNotKnowIsAdoptedAfterAKill() async throws {
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let id = try #require(app.send("m", to: inbox))
        app.system.kill(afterInteractions: 1)  // dies once the task exists, before its record
        await app.enterBackground()
        #expect(app.system.appState == .notRunning)
        #expect(app.system.outstandingCount == 1)
        await app.system.launch()  // the user opens the app before the task ran
        let courier = try #require(app.courier)
        await courier.settle()
        // Adopted, then back to the engine (the app is on screen), whichever of reconciliation
        // and `appDidEnterForeground()` came first: the task is cancelled before it sent a byte.
        #expect(courier.handedOffCount == 0)
        #expect(app.system.statistics.tasksCancelled == 1)
        await app.system.advance(by: .seconds(30))
        #expect(courier.pendingCount == 0)
        #expect(server.transport.requests.map(\.messageID) == [id], "adopted, not sent twice")
        #expect(app.system.statistics.requests == 0, "the engine sent it, not the session")
        #expect(app.system.statistics.engineRequests == 1)
    }

    @Test func anUploadThatCompletedWhileTheAppWasDeadStillDelivers() async throws {
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let id = try #require(app.send("m", to: inbox))
        app.system.kill(afterInteractions: 1)  // the task exists; its record was never written
        await app.enterBackground()
        await app.system.advance(by: .seconds(30))  // it runs; iOS relaunches the app to hear it
        #expect(app.system.statistics.relaunches == 1)
        #expect(app.openCount == 2)
        #expect(app.courier?.pendingCount == 0)
        #expect(server.transport.requests.map(\.messageID) == [id], "heard before anything was handed off again")
    }

    @Test func a401GoesBackToTheForegroundWhereFreshCredentialsAreMade() async throws {
        let server = Server { request, _ in
            request.headers["Authorization"] == "token-1" ? .response(status: 401) : .response(status: 200)
        }
        var configuration = Self.configuration()
        let tokens = Server.Counts()
        let issuer = MessageID()
        configuration.prepareRequest = { request in request.headers["Authorization"] = "token-\(tokens.next(issuer))" }
        let app = SimulatedApp(server: server.transport, configuration: configuration)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let id = try #require(app.send("m", to: inbox))
        await app.enterBackground()
        await app.system.advance(by: .seconds(600))
        #expect(app.system.statistics.tasksCreated == 1, "not handed off again with stale credentials")
        #expect(app.courier?.pendingCount == 1)
        await app.enterForeground()
        try await app.courier?.delivered(id)
        #expect(server.transport.requests.map { $0.headers["Authorization"] } == ["token-1", "token-2"])
    }

    @Test func anExcludedHostIsNeverHandedOff() async throws {
        let server = Server()
        var configuration = Self.configuration()
        configuration.backgroundUploads?.excludedHosts = ["EXAMPLE.com"]
        let app = SimulatedApp(server: server.transport, configuration: configuration)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        _ = app.send("kept", to: inbox)
        let other = try #require(app.send("goes", to: URL(string: "https://other.example/in")!))
        await app.enterBackground()
        await app.system.advance(by: .seconds(60))
        #expect(server.transport.requests.map(\.messageID) == [other])
        #expect(app.courier?.pendingCount == 1)
    }

    @Test func theBoundCapsOutstandingTasks() async throws {
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: Self.configuration(bound: 3))
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        for i in 0..<10 { _ = app.send("m\(i)", to: inbox) }
        await app.enterBackground()
        #expect(app.system.outstandingCount == 3)
        await app.system.advance(by: .seconds(600))
        #expect(app.courier?.pendingCount == 0)
        #expect(server.transport.requests.count == 10)
    }
}

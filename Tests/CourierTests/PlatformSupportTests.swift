@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The platform-neutral halves of the Apple integration, tested here so the Apple-only files
/// stay thin (issue 8).
@Suite struct PlatformSupportTests {
    @Test func theNetworkPolicyIsMappedOntoTheSessionConfiguration() {
        var c = Courier.Configuration()
        c.allowsPurgeableDirectory = true
        #expect(URLSessionTransport.sessionConfiguration(for: c).allowsCellularAccess)
        c.allowsCellularAccess = false
        c.allowsExpensiveNetworkAccess = false
        c.allowsConstrainedNetworkAccess = false
        let session = URLSessionTransport.sessionConfiguration(for: c)
        #expect(!session.allowsCellularAccess)
        #if canImport(Darwin)
        #expect(!session.allowsExpensiveNetworkAccess && !session.allowsConstrainedNetworkAccess)
        #endif
    }

    @Test func aBackgroundRunThatDeliversEverythingSucceedsAndAsksForNoOther() async throws {
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(
            directory: scratch.url,
            configuration: testConfiguration(
                clock: ManualClock(),
                transport: ScriptedTransport()))
        courier.pause()
        try courier.send(["n": 1], to: inbox)
        let outcome = await courier.runBackgroundDelivery(within: Courier.backgroundBudget)
        #expect(outcome.success && !outcome.reschedule)
        await courier.close()
    }

    @Test func aBackgroundRunCutShortAsksForAnother() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(
            directory: scratch.url,
            configuration: testConfiguration(clock: clock, transport: transport))
        try courier.send(["n": 1], to: inbox)
        let run = Task { await courier.runBackgroundDelivery(within: Courier.backgroundBudget) }
        await transport.waitForRequests(1)
        run.cancel()  // iOS expired the task
        let outcome = await run.value
        #expect(!outcome.success && outcome.reschedule)
        await courier.close()
    }

    /// The window as the app leaves the screen (`useBackgroundWindow`, what the iOS lifecycle
    /// integration runs in its background task): the engine delivers first, the message the
    /// server refused a moment ago included; what still fails near the end is handed off; a
    /// paused courier hands off at once.
    @Test(arguments: [false, true])
    func theEngineDeliversFirstAndWhatIsLeftIsHandedOffBeforeTheWindowEnds(paused: Bool) async throws {
        let clock = ManualClock()
        let refused = Locked<Set<MessageID>>([])
        let transport = ScriptedTransport { request in
            refused.withLock { $0 }.contains(request.messageID) ? .response(status: 503) : .response(status: 200)
        }
        let session = RecordingSession()
        var configuration = testConfiguration(clock: clock, transport: transport)
        configuration.retry = RetryPolicy(initialDelay: .seconds(30), jitter: .none)
        configuration.backgroundUploads = Courier.BackgroundUploads(session: session)
        let scratch = TemporaryDirectory()
        let courier = try Courier(directory: scratch.url, configuration: configuration)
        await courier.core.status.reconciliation?.value
        courier.appDidEnterForeground()
        let typed = try courier.send(["n": 1], to: inbox)
        let failing = try courier.send(["n": 2], to: inbox)
        refused.withLock { $0 = [typed, failing] }
        await courier.settle()  // both refused once: waiting 30 s
        refused.withLock { $0 = [failing] }  // the server takes the first from now on
        if paused { courier.pause() }
        let window = Task { await courier.useBackgroundWindow(Courier.backgroundBudget) { true } }
        // Bounded: the window, in 250 ms steps of the courier's clock.
        for _ in 0..<200 where session.requests.withLock({ $0.isEmpty }) {
            await clock.advance(by: .milliseconds(250))
            await courier.settle()
        }
        _ = await window.value
        let handedOff = Set(
            session.requests.withLock { $0.compactMap { HandOff.parse(taskDescription: $0.taskDescription)?.id } })
        if paused {
            // At once, one at a time to a destination that fails (`Projection.startTime`).
            #expect(handedOff == [typed] && clock.now.offset < .seconds(1), "paused: nothing goes by the engine")
            #expect(transport.requests.count == 2, "only the first attempts, before the window")
        } else {
            #expect(handedOff == [failing], "the typed one went by the engine")
            #expect(transport.requests.filter { $0.messageID == typed }.count == 2)
            #expect(clock.now.offset >= Courier.backgroundBudget - Courier.handOffReserve, "handed off near the end")
        }
        await courier.close()
    }

    /// A processing task delivers what the background session does not have and ends as soon as
    /// that is done: waiting for the handed-off uploads (discretionary, the system's to run)
    /// would hold it until iOS expired it, and report failure.
    @Test func aBackgroundRunEndsOnceOnlyHandedOffMessagesAreLeft() async throws {
        let server = BackgroundHandOffTests.Server()
        var config = BackgroundHandOffTests.configuration()
        config.backgroundUploads?.excludedHosts = ["excluded.example"]
        let app = SimulatedApp(server: server.transport, configuration: config)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        let courier = try #require(app.courier)
        courier.pause()
        for i in 0..<3 {
            _ = app.send("kept \(i)", to: URL(string: "https://excluded.example/in")!)
            _ = app.send("handed \(i)", to: inbox)
        }
        await app.enterBackground()
        #expect(courier.handedOffCount == 3 && courier.pendingCount == 6)
        let outcome = await courier.runBackgroundDelivery(within: .seconds(3600))
        #expect(outcome.success && !outcome.reschedule, "what was left is the system's")
        #expect(courier.pendingCount == 3 && courier.handedOffCount == 3)
        #expect(app.system.manualClock.now.offset < .seconds(1), "it did not wait out its budget")
        #expect(server.transport.requests.count == 3, "the excluded three, by the engine")
    }

    @Test func closeStopsThePlatformIntegration() async throws {
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(
            directory: scratch.url,
            configuration: testConfiguration(
                clock: ManualClock(),
                transport: ScriptedTransport()))
        let integration = FakeIntegration()
        courier.core.handle(.lifecycle(integration))
        await courier.close()
        #expect(await integration.stopped)
        #expect(!courier.core.diagnostics.hasLifecycle)
    }
}

/// A cold background launch runs the task's handler before the app has opened its courier:
/// the handler waits for it, or for its task's expiration.
@Suite struct BackgroundDeliveryRegistryTests {
    /// The test's folder, removed when the test ends (each test gets a new suite value).
    private let scratch = TemporaryDirectory()

    /// One courier per test, in its folder.
    func courier() throws -> Courier {
        try Courier(
            directory: scratch.url,
            configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
    }

    /// A background task's handler waiting for the courier, returned once it is registered.
    func waitingHandler(_ registry: BackgroundDeliveryRegistry) async -> Task<Courier?, Never> {
        let (registered, signal) = AsyncStream.makeStream(of: Void.self)
        let handler = Task { await registry.waitForCourier(waiting: { signal.yield() }) }
        var events = registered.makeAsyncIterator()
        await events.next()
        return handler
    }

    @Test func aCourierAlreadyOpenIsReturnedAtOnce() async throws {
        let registry = BackgroundDeliveryRegistry()
        let opened = try courier()
        registry.courier = opened
        #expect(await registry.waitForCourier() === opened)
        #expect(registry.waitingCount == 0)
        await opened.close()
    }

    @Test func aHandlerThatRanFirstGetsTheCourierWhenTheAppOpensIt() async throws {
        let registry = BackgroundDeliveryRegistry()
        let handler = await waitingHandler(registry)
        #expect(registry.waitingCount == 1)
        let opened = try courier()
        registry.courier = opened
        #expect(await handler.value === opened)
        #expect(registry.waitingCount == 0)
        await opened.close()
    }

    @Test func anExpiredWaitReturnsNilAndLeavesNoWaiter() async throws {
        let registry = BackgroundDeliveryRegistry()
        let handler = await waitingHandler(registry)
        handler.cancel()  // the task's expiration handler
        #expect(await handler.value == nil)
        #expect(registry.waitingCount == 0)
        let opened = try courier()
        registry.courier = opened  // a courier opened later resumes no one twice
        await opened.close()
    }

    /// A courier opened without `lifecycle:` is offered: the background task finds it, unless
    /// an open one is set already (`open(…, lifecycle:)` sets its own over an offered one).
    @Test func anOfferedCourierIsFoundUnlessAnOpenOneIsSet() async throws {
        let registry = BackgroundDeliveryRegistry()
        let handler = await waitingHandler(registry)
        let first = try courier()
        registry.offer(first)
        #expect(await handler.value === first, "a handler waiting gets the first courier opened")
        let other = TemporaryDirectory()
        let second = try Courier(
            directory: other.url,
            configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        registry.offer(second)
        #expect(registry.courier === first, "an open courier is kept")
        await first.close()
        registry.offer(second)
        #expect(registry.courier === second, "a closed one is not")
        await second.close()
    }

    @Test func aWaitCancelledBeforeItBeginsReturnsNil() async {
        let registry = BackgroundDeliveryRegistry()
        let handler = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await registry.waitForCourier()
        }
        #expect(await handler.value == nil)
        #expect(registry.waitingCount == 0)
    }
}

@MainActor
final class FakeIntegration: PlatformIntegration {
    var stopped = false
    func stop() { stopped = true }
}

/// What completes a background task exactly once, by whichever of its work and its expiration
/// handler gets there first (and runs an expiring activity's work once): `Locked.take()`.
@Suite struct TakeOnceTests {
    @Test func onlyTheFirstTakeWinsAcrossThreads() async {
        let once = Locked<Int?>(1)
        let wins = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<50 { group.addTask { once.take() != nil } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(wins == 1)
    }
}

@_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// Background hand-off in what a device does and the simulation first did not: a network the
/// app does not allow, tasks iOS holds past their begin date, a cold relaunch heard before the
/// lifecycle wiring, and a message that cannot be read back (issue 23, A1, A2, A6).
@Suite(.timeLimit(.minutes(1))) struct HandOffOnDeviceTests {
    typealias Server = BackgroundHandOffTests.Server

    enum Policy: CaseIterable, Sendable { case noCellular, noExpensive, noLowDataMode }

    @Test(arguments: Policy.allCases)
    func anUploadWaitsForANetworkTheAppAllows(_ policy: Policy) async throws {
        var configuration = BackgroundHandOffTests.configuration()
        let forbidden: SimulatedBackgroundSystem.Network
        switch policy {
        case .noCellular: configuration.allowsCellularAccess = false; forbidden = .cellular
        case .noExpensive: configuration.allowsExpensiveNetworkAccess = false; forbidden = .cellular
        case .noLowDataMode: configuration.allowsConstrainedNetworkAccess = false; forbidden = .lowDataWiFi
        }
        let server = Server()
        let app = SimulatedApp(server: server.transport, configuration: configuration)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let ids = (0..<3).compactMap { app.send("m\($0)", to: inbox) }
        app.system.network = forbidden
        await app.enterBackground()
        await app.system.advance(by: .seconds(3600))
        #expect(server.transport.requests.isEmpty, "nothing goes over a network the app does not allow")
        #expect(app.courier?.handedOffCount == 3)
        app.system.network = .wifi
        await app.system.advance(by: .seconds(60))
        #expect(Set(server.transport.requests.map(\.messageID)) == Set(ids))
        #expect(app.courier?.pendingCount == 0)
    }

    @Test func returningToTheForegroundTakesBackTasksTheSystemHoldsPastTheirBeginDate() async throws {
        var model = SimulatedBackgroundSystem.Model()
        model.discretionaryDelay = .seconds(4 * 3600)  // made in the background: iOS waits for Wi-Fi or power
        let server = Server()
        let app = SimulatedApp(
            server: server.transport, configuration: BackgroundHandOffTests.configuration(),
            model: model)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        app.courier?.pause()
        let ids = (0..<3).compactMap { app.send("m\($0)", to: inbox) }
        await app.enterBackground()
        await app.system.advance(by: .seconds(600))  // every begin date passed long ago
        #expect(server.transport.requests.isEmpty)
        await app.enterForeground()
        await app.system.advance(by: .seconds(1))
        let courier = try #require(app.courier)
        await courier.settle()
        #expect(courier.handedOffCount == 0, "every task not sending is taken back")
        #expect(courier.pendingCount == 0, "the engine delivered them while the app was on screen")
        #expect(Set(server.transport.requests.map(\.messageID)) == Set(ids))
        #expect(app.system.statistics.tasksCancelled == 3)
        #expect(app.system.statistics.inFlightTwice == 0)
    }

    /// A cold relaunch that hears a failed upload before anything told the courier where the
    /// app is (on iOS the lifecycle integration is wired after the courier opens): the message
    /// is handed off again, not attempted by an engine that iOS is about to suspend.
    @Test func aCompletionHeardBeforeTheLifecycleWiringIsHandedOffAgain() async throws {
        // b (its own destination): its engine attempt is refused for 100 s, then its task fails
        // once. a: its task fails once.
        let other = URL(string: "https://other.example/in")!
        let server = Server { request, n in
            if request.url == other {
                return [1: .response(status: 503, retryAfter: "100"), 2: .response(status: 500)][n]
                    ?? .response(status: 200)
            }
            return n == 1 ? .response(status: 500) : .response(status: 200)
        }
        let app = SimulatedApp(server: server.transport, configuration: BackgroundHandOffTests.configuration())
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        app.pausesEngineAtBackgroundLaunch = false
        await app.system.launch()
        let courier = try #require(app.courier)
        let b = try #require(app.send("b", to: other))
        await courier.settle()  // b's engine attempt: 503, Retry-After 100 s
        courier.pause()
        let a = try #require(app.send("a", to: inbox))
        await app.enterBackground()  // a begins now, b in 100 s
        app.system.didFinishEvents = nil  // no lifecycle wiring in the processes to come
        app.system.kill()
        await app.system.advance(by: .seconds(600))
        #expect(app.system.statistics.relaunches >= 1)
        let relaunched = try #require(app.courier)
        await relaunched.settle()
        // a's task ended before the relaunch: the new process found it gone and its engine sent
        // a (1 request). b's task failed after the relaunch: b was handed off again.
        #expect(app.system.statistics.engineRequests == 2, "b's first attempt and a's orphan, nothing more")
        #expect(app.system.statistics.tasksCreated == 3, "a, b, and b again")
        #expect(relaunched.pendingCount == 0)
        #expect(server.transport.requests.filter { $0.messageID == b }.count == 3)
        #expect(server.transport.requests.contains { $0.messageID == a })
    }

    /// A failed upload whose message cannot be read back is not judged as if just sent (then
    /// `expiry` could never give up on it): the hand-off keeps the message's creation time, so
    /// the policy judges it by its real age without reading it. (A hand-off replayed after a
    /// relaunch does not know it: its message is read, and if that fails it waits
    /// `maximumDelay`, as an engine attempt's would.)
    @Test func aFailedUploadOfAnUnreadableMessageIsJudgedByItsRealAge() async throws {
        var configuration = BackgroundHandOffTests.configuration()
        configuration.retry = RetryPolicy(
            initialDelay: .seconds(1), maximumDelay: .seconds(64), jitter: .none,
            expiry: .seconds(120))
        let server = Server { _, _ in .response(status: 500) }
        let app = SimulatedApp(server: server.transport, configuration: configuration)
        app.hearsFirstAnswersBeforeSuspending = false  // what happens while suspended
        await app.system.launch()
        let courier = try #require(app.courier)
        courier.pause()
        let events = courier.events()
        let collector = Task {
            var all: [CourierEvent] = []; for await event in events { all.append(event) }; return all
        }
        // Larger than the recent-state cache keeps: every read goes to the log.
        let id = try #require(app.send(String(repeating: "x", count: 4000), to: inbox))
        await app.system.advance(by: .seconds(300))  // the app waits; the message is 300 s old
        await app.enterBackground()
        app.fileSystem.inject(.error(5), on: .read)  // the read when its failure is heard
        await app.system.advance(by: .seconds(600))
        await courier.close()
        let all = await collector.value
        let judgedAsNew = all.contains {
            if case .failed(id, attempt: 1, _, .some) = $0 { return true }  // a next attempt: a retry
            return false
        }
        #expect(!judgedAsNew)
        #expect(
            all.contains {
                if case .abandoned(id, 1, _) = $0 { return true }; return false
            },
            "judged by its real age at its first failure")
    }
}

@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation

extension BackgroundScenarios {
    /// Line 4: the message typed just before the app leaves the screen.
    public struct JustTyped: Sendable, Equatable, CustomStringConvertible {
        /// From `send` to the server's 2xx, on the virtual clock (nil: not delivered in 2 hours).
        public var latency: Duration?
        /// The app's requests and the background session's.
        public var engineRequests: Int
        public var uploads: Int

        public var description: String {
            "delivered \(latency.map { "\(seconds($0)) s" } ?? "not in 2 h") after send, \(engineRequests) request(s) "
                + "from the app, \(uploads) upload(s) from the background session"
        }
    }

    /// A message sent while the server answers 503, 1 s before the app leaves the screen (it
    /// waits out a backoff of up to 30 s), the server answering again from the moment the app
    /// leaves, under a system that holds uploads made in the
    /// background for an hour (discretionary: waiting for Wi-Fi or power). With the window iOS
    /// grants (`window`, the lifecycle integration's 25 s) the engine delivers it first; with
    /// `Courier.handOffReserve` only, it is handed off at once, as before the engine came first.
    public static func justTyped(window: Duration? = nil) async -> JustTyped {
        let leaving = Duration.seconds(10)
        let server = Server { now in now < leaving ? .response(status: 503) : .response(status: 200) }
        var model = Self.model
        model.discretionaryDelay = .seconds(3600)
        var configuration = configuration()
        configuration.retry.initialDelay = .seconds(30)
        let app = SimulatedApp(server: server.transport, configuration: configuration, model: model)
        server.clock = app.system.manualClock
        app.backgroundWindow = window ?? Courier.backgroundBudget
        await app.system.launch()
        await app.system.advance(by: leaving - .seconds(1))
        let sentAt = app.system.manualClock.now.offset
        let url = URL(string: "https://api.example.com/messages")!
        guard let id = app.send("just typed", to: url) else { return JustTyped(engineRequests: 0, uploads: 0) }
        await app.courier?.settle()  // its first attempt, answered 503
        await app.system.advance(by: .seconds(1))
        await app.enterBackground()
        // Bounded: 2 hours of 10 s steps.
        for _ in 0..<720 where !server.accepted.contains(id) { await app.system.advance(by: .seconds(10)) }
        let latency = server.accepted.contains(id) ? server.lastAcceptedAttempt.map { $0 - sentAt } : nil
        let statistics = app.system.statistics
        return JustTyped(latency: latency, engineRequests: statistics.engineRequests, uploads: statistics.requests)
    }
}

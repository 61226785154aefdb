@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation

/// The three background scenarios of `make bench-background`, on `SimulatedBackgroundSystem`
/// and virtual time (nothing sleeps; all three take about a second). `make test` asserts what
/// they promise (`BackgroundDeliveryPromiseTests`), so a change that loses delivery while
/// suspended fails CI instead of waiting for someone to run the benchmark.
///
/// A run is deterministic: the same seeds give the same figures, run after run (the system
/// waits for the app after every step; see `SimulatedBackgroundSystem`).
public enum BackgroundScenarios {
    /// Line 1 (and 3): an app suspended for 30 minutes with `count` messages and a server
    /// failing half the time at random, ended by the system at minutes 7, 15 and 22.
    public struct Suspended: Sendable, Equatable, CustomStringConvertible {
        public var messages: Int
        public var deliveredWhileSuspended: Int
        /// When the last message was accepted, if all were, on the virtual clock.
        public var lastDelivery: Duration?
        public var statistics: SimulatedBackgroundSystem.Statistics
        /// The shortest and longest gap between two attempts of one message.
        public var gaps: (shortest: Duration, longest: Duration)?
        /// Messages never delivered, even once the app ran again for up to 2 hours.
        public var lost: Int
        public var model: SimulatedBackgroundSystem.Model

        public static func == (a: Self, b: Self) -> Bool {
            a.messages == b.messages && a.deliveredWhileSuspended == b.deliveredWhileSuspended
                && a.lastDelivery == b.lastDelivery && a.statistics == b.statistics && a.gaps?.0 == b.gaps?.0
                && a.gaps?.1 == b.gaps?.1 && a.lost == b.lost
        }

        public var description: String {
            let pending = messages - deliveredWhileSuspended
            let s = statistics
            let gapText = gaps.map { "\(seconds($0.shortest))–\(seconds($0.longest)) s" } ?? "none"
            return "suspended 30 min, \(messages) messages, server failing 50%: delivered "
                + "\(deliveredWhileSuspended) while suspended"
                + (pending == 0
                    ? " (the last at \(lastDelivery.map(seconds) ?? "?") s)"
                    : ", \(pending) still pending (delivered once the app runs)")
                + ", \(s.tasksCreated) tasks, \(s.wakes) wakes, \(s.relaunches) relaunches after the system ended "
                + "the app, gaps between attempts of one message \(gapText), \(lost) lost, \(s.inFlightTwice) in "
                + "flight twice (simulated: requests of \(seconds(model.requestDuration)) s, "
                + "\(model.connectionsPerHost.map(String.init) ?? "any number of") at once per host, wake "
                + "\(seconds(model.wakeDelay)) s after the session is idle, rate limiter "
                + "\(seconds(model.rateLimiterInitialDelay)) s doubling to \(seconds(model.rateLimiterMaximumDelay)) s)"
        }
    }

    /// Line 2: a 10-minute total outage (503) while suspended, then recovery.
    public struct Outage: Sendable, Equatable, CustomStringConvertible {
        public var messages: Int
        public var outage: Duration
        public var requestsDuringOutage: Int
        /// Requests in the outage's first second, before the destination was known down.
        public var requestsInFirstSecond: Int
        /// From the end of the outage to the last delivery, if any was delivered.
        public var lastDeliveryAfterRecovery: Duration?
        public var deliveredWhileSuspended: Int
        public var lost: Int
        public var inFlightTwice: Int

        public var description: String {
            let recovery =
                lastDeliveryAfterRecovery.map { "last delivery \(seconds($0)) s after recovery" } ?? "nothing delivered"
            return "outage of \(seconds(outage)) s while suspended, \(messages) messages: \(requestsDuringOutage) "
                + "requests during the outage (\(requestsInFirstSecond) in its first second, before the destination "
                + "was known down, then \(requestsDuringOutage - requestsInFirstSecond) probes), \(recovery), "
                + "delivered \(deliveredWhileSuspended) while suspended, \(lost) lost, \(inFlightTwice) in flight twice"
        }
    }

    /// The system of every scenario: a request takes 100 ms, and at most 6 run at once to
    /// one host (iOS's default `httpMaximumConnectionsPerHost`); wakes 1 s after a completion;
    /// the rate limiter at 1 s, doubling at each wake to 60 s.
    public static var model: SimulatedBackgroundSystem.Model {
        var model = SimulatedBackgroundSystem.Model()
        model.requestDuration = .milliseconds(100)
        model.connectionsPerHost = 6
        return model
    }

    /// `model` under the rate limiter Apple's forums report for background sessions: 60 s,
    /// doubling at each wake up to an hour.
    public static var applesRateLimiter: SimulatedBackgroundSystem.Model {
        var model = Self.model
        model.rateLimiterInitialDelay = .seconds(60)
        model.rateLimiterMaximumDelay = .seconds(3600)
        return model
    }

    /// Line 1 (default model) or line 3 (`applesRateLimiter`).
    public static func suspended(model: SimulatedBackgroundSystem.Model = model, count: Int = 500) async -> Suspended {
        let random = SeededRandomSource(seed: 500)
        let server = Server { _ in random.next() % 2 == 0 ? .response(status: 200) : .response(status: 500) }
        let app = SimulatedApp(server: server.transport, configuration: configuration(), model: model)
        server.clock = app.system.manualClock
        let ids = await start(app, count: count)
        // 30 minutes suspended; the system ends the app at minutes 7, 15 and 22 (memory pressure).
        for minute in 1...30 {
            await app.system.advance(by: .seconds(60))
            if [7, 15, 22].contains(minute), app.system.appState != .notRunning { app.system.kill() }
        }
        let statistics = app.system.statistics
        let accepted = server.accepted
        let delivered = Set(ids).intersection(accepted).count
        let last = delivered == ids.count ? server.lastAcceptedAttempt : nil
        let gaps = server.gaps
        let lost = await drain(app, server, ids)
        return Suspended(
            messages: ids.count, deliveredWhileSuspended: delivered, lastDelivery: last, statistics: statistics,
            gaps: gaps, lost: lost, model: model)
    }

    /// Line 2.
    public static func outage(count: Int = 100, outage outageEnd: Duration = .seconds(600)) async -> Outage {
        let server = Server { now in now < outageEnd ? .response(status: 503) : .response(status: 200) }
        let app = SimulatedApp(server: server.transport, configuration: configuration(), model: model)
        server.clock = app.system.manualClock
        let ids = await start(app, count: count)
        await app.system.advance(by: .seconds(1800))
        let times = server.requestTimes
        let delivered = Set(ids).intersection(server.accepted).count
        let lastDelivery = server.lastAcceptedAttempt.map { $0 - outageEnd }
        let inFlightTwice = app.system.statistics.inFlightTwice
        let lost = await drain(app, server, ids)
        return Outage(
            messages: ids.count, outage: outageEnd, requestsDuringOutage: times.filter { $0 < outageEnd }.count,
            requestsInFirstSecond: times.filter { $0 < .seconds(1) }.count, lastDeliveryAfterRecovery: lastDelivery,
            deliveredWhileSuspended: delivered, lost: lost, inFlightTwice: inFlightTwice)
    }

    static func configuration() -> Courier.Configuration {
        var c = Courier.Configuration()
        c.random = SeededRandomSource(seed: 2026).next
        c.makeMessageID = SequentialMessageIDs().next
        c.retry = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(64))
        c.durability = .never
        c.backgroundUploads = Courier.BackgroundUploads(session: Placeholder())
        return c
    }

    /// Launches the app, sends `count` messages, and sends it to the background.
    static func start(_ app: SimulatedApp, count: Int) async -> [MessageID] {
        await app.system.launch()
        app.courier?.pause()  // everything goes through the hand-off
        let url = URL(string: "https://api.example.com/messages")!
        let ids = (0..<count).compactMap { app.send("message \($0)", to: url) }
        await app.enterBackground()
        return ids
    }

    /// Brings the app back and runs it until every message is delivered (at most 2 virtual
    /// hours): how many were lost, that is never delivered.
    static func drain(_ app: SimulatedApp, _ server: Server, _ ids: [MessageID]) async -> Int {
        await app.enterForeground()
        for _ in 0..<240 where !Set(ids).isSubset(of: server.accepted) {
            await app.system.advance(by: .seconds(30))
            await app.courier?.settle()
        }
        return Set(ids).subtracting(server.accepted).count
    }

    static func seconds(_ d: Duration) -> String {
        String(format: "%.1f", Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
    }
}

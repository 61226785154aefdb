@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation

/// The retry-tail scenarios of issue 36 on virtual time: a server that fails at random, a
/// poison message, outages and a server failing 90% of all requests, each run with the default
/// settings and with the rules `.disabled` (explained failures, the retry budget, and the old
/// 300 s probe cap), through the public API on a `ManualClock`. The server answers at once, so
/// only the retry rules set the times. `make bench-drain` prints them beside its loopback rows;
/// `make test` asserts the targets (`RetryTailPromiseTests`). Deterministic: a seed fixes every
/// failure and every jitter.
public enum RetryScenarios {
    /// What the server does.
    public struct Server: Sendable {
        /// Each request fails (500) with this probability, at random.
        public var failureRate: Double
        /// Until then (virtual time since the start), every request fails: an outage.
        public var outage: Duration?
        public init(failureRate: Double, outage: Duration? = nil) {
            self.failureRate = failureRate
            self.outage = outage
        }
    }

    public struct Scenario: Sendable {
        public var name: String
        public var server: Server
        /// Messages sent at the start.
        public var atOnce: Int
        /// Then one message every `steadyInterval`, for `steadyFor`.
        public var steadyInterval: Duration?
        public var steadyFor: Duration
        /// One more message at the start that the server always refuses (500).
        public var poison: Bool
        /// The run stops here (or once every message but the poison one is delivered, after
        /// the steady traffic, if there is no poison).
        public var horizon: Duration

        public init(
            _ name: String, server: Server, atOnce: Int = 0, steadyInterval: Duration? = nil,
            steadyFor: Duration = .zero, poison: Bool = false, horizon: Duration
        ) {
            self.name = name
            self.server = server
            self.atOnce = atOnce
            self.steadyInterval = steadyInterval
            self.steadyFor = steadyFor
            self.poison = poison
            self.horizon = horizon
        }
    }

    /// The rules under test, or none of them.
    public enum Rules: String, Sendable, CaseIterable {
        /// `Courier.Configuration()`'s.
        case defaults
        /// `retry.explainedFailures` and `retryBudget` `.disabled`, probes capped by the retry
        /// policy's 300 s: the rules before issue 36.
        case disabled

        /// Sets `configuration`'s rules to these.
        public func apply(to configuration: inout Courier.Configuration) {
            guard self == .disabled else { return }
            configuration.retry.explainedFailures = .disabled
            configuration.retryBudget = .disabled
            configuration.destinationBackoff.maximumProbeDelay = configuration.retry.maximumDelay
        }
    }

    /// The table, in its order.
    public static let all: [Scenario] = [
        Scenario("1,000 at once, 50% 500s", server: Server(failureRate: 0.5), atOnce: 1_000, horizon: .seconds(7_200)),
        Scenario("300 at once, 50% 500s", server: Server(failureRate: 0.5), atOnce: 300, horizon: .seconds(7_200)),
        Scenario(
            "2 a second for 90 s, 50% 500s", server: Server(failureRate: 0.5), steadyInterval: .milliseconds(500),
            steadyFor: .seconds(90), horizon: .seconds(7_200)),
        Scenario(
            "1 a second for 10 min, 50% 500s", server: Server(failureRate: 0.5), steadyInterval: .seconds(1),
            steadyFor: .seconds(600), horizon: .seconds(7_200)),
        Scenario(
            "a poison message beside 1 a second that succeed, 3 h", server: Server(failureRate: 0),
            steadyInterval: .seconds(1), steadyFor: .seconds(10_800), poison: true, horizon: .seconds(10_800)),
        Scenario(
            "a poison message beside 1 a second at 50% 500s, 3 h", server: Server(failureRate: 0.5),
            steadyInterval: .seconds(1), steadyFor: .seconds(10_800), poison: true, horizon: .seconds(10_800)),
        Scenario(
            "500 waiting through a 60 s outage", server: Server(failureRate: 0, outage: .seconds(60)), atOnce: 500,
            horizon: .seconds(7_200)),
        Scenario(
            "500 waiting through a 1 h outage", server: Server(failureRate: 0, outage: .seconds(3_600)), atOnce: 500,
            horizon: .seconds(14_400)),
        Scenario("1,000 at once, 90% 500s", server: Server(failureRate: 0.9), atOnce: 1_000, horizon: .seconds(43_200))
    ]

    /// The configuration a run uses: deterministic (seeded jitter and ids, a simulated disk),
    /// with `rules`.
    public static func configuration(
        _ rules: Rules, clock: ManualClock, transport: ScriptedTransport, seed: UInt64
    ) -> Courier.Configuration {
        var config = Courier.Configuration()
        config.clock = clock
        config.transport = transport
        config.random = SeededRandomSource(seed: seed).next
        config.makeMessageID = SequentialMessageIDs().next
        config.fileSystem = SimulatedFileSystem()
        config.durability = .never
        // The server answers at once, so concurrency would only shuffle the order in which
        // outcomes draw their jitter: one at a time, a run is the same run after run.
        config.maximumConcurrentDeliveries = 1
        rules.apply(to: &config)
        return config
    }
}

@_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation

extension RetryScenarios {
    /// What a run measured. Times are virtual seconds.
    public struct Result: Sendable, Equatable, CustomStringConvertible {
        public var rules: Rules
        /// Messages sent (the poison one left out) and delivered.
        public var sent: Int
        public var delivered: Int
        /// Send-to-delivered time of each delivered message, ascending.
        public var latencies: [Double]
        /// Requests to the server, the poison message's included.
        public var requests: Int
        /// How long the run took: until its last request or the horizon.
        public var seconds: Double
        /// Requests while the server was out, and when the last message was delivered after it.
        public var requestsDuringOutage: Int?
        public var lastDeliveredAfterOutage: Double?
        /// The poison message's requests in its first hour, and per hour after it.
        public var poisonFirstHour: Int?
        public var poisonPerHourAfter: Double?

        /// The `p`-th percentile (0...1) of `latencies`.
        public func percentile(_ p: Double) -> Double { RetryScenarios.percentile(p, of: latencies) }

        public var requestsPerMessage: Double { Double(requests) / Double(max(1, delivered)) }
        public var requestsPerSecond: Double { Double(requests) / max(seconds, 1) }

        public var description: String {
            func f(_ x: Double) -> String { String(format: x < 10 ? "%.2f" : "%.1f", x) }
            var text = "\(rules.rawValue): \(delivered)/\(sent) delivered"
            if !latencies.isEmpty {
                text += "; p50 \(f(percentile(0.5))) s, p99 \(f(percentile(0.99))) s, max \(f(latencies.last!)) s"
            }
            text += "; \(requests) requests (\(f(requestsPerMessage)) a message, \(f(requestsPerSecond))/s over "
            text += "\(f(seconds)) s)"
            if let during = requestsDuringOutage {
                text += "; \(during) during the outage, last delivered "
                text += lastDeliveredAfterOutage.map { "\(f($0)) s after it" } ?? "never"
            }
            if let first = poisonFirstHour, let after = poisonPerHourAfter {
                text += "; poison: \(first) requests in its first hour, \(f(after))/h after"
            }
            return text
        }
    }

    /// What the server saw, in order.
    private struct Request {
        var seconds: Double
        var id: MessageID
        var succeeded: Bool
    }

    /// Runs `scenario` under `rules` with `seed`, jumping from one timer to the next.
    public static func run(_ scenario: Scenario, _ rules: Rules, seed: UInt64 = 36) async throws -> Result {
        let clock = ManualClock()
        let random = Locked(SplitMix64(seed: seed ^ 0x5eed))
        let log = Locked<[Request]>([])
        let outageSeconds = scenario.server.outage?.seconds ?? 0
        let transport = ScriptedTransport { request in
            let now = clock.now.offset.seconds
            let poisoned = request.body.elementsEqual(Self.poisonBody)
            let roll = Double(random.withLock { $0.next() } >> 11) / Double(1 << 53)
            let succeeded = !poisoned && now >= outageSeconds && roll >= scenario.server.failureRate
            log.withLock { $0.append(Request(seconds: now, id: request.messageID, succeeded: succeeded)) }
            return .response(status: succeeded ? 200 : 500)
        }
        let config = configuration(rules, clock: clock, transport: transport, seed: seed)
        let courier = try Courier(directory: URL(fileURLWithPath: "/retry-tail"), configuration: config)
        var sentAt: [MessageID: Double] = [:]
        var poison: MessageID?
        if scenario.poison { poison = try courier.send(["poison": true], to: destination) }
        for n in 0..<scenario.atOnce { sentAt[try courier.send(["n": n], to: destination)] = 0 }
        var steady = scenario.steadyInterval.map { _ in Duration.zero }
        // Bounded: each turn moves the clock to the next timer or send (or the horizon).
        for _ in 0..<2_000_000 {
            await courier.settle()
            let now = clock.now.offset
            while let next = steady, next <= now, next < scenario.steadyFor, let interval = scenario.steadyInterval {
                sentAt[try courier.send(["t": next.seconds], to: destination)] = now.seconds
                steady = next + interval
            }
            await courier.settle()
            let trafficOver = steady.map { $0 >= scenario.steadyFor } ?? true
            let othersPending = courier.pendingCount - (poison == nil ? 0 : 1)
            if now >= scenario.horizon || (trafficOver && othersPending == 0 && poison == nil) { break }
            // The engine's timer (the courier opened at the clock's zero, so its deadline is an
            // offset); without one, a second at a time, never a leap.
            var next = min(courier.nextTimerDeadlineForTesting ?? (now + .seconds(1)), scenario.horizon)
            if let s = steady, s < scenario.steadyFor { next = min(next, s) }
            guard next > now else {
                await clock.advance(by: .milliseconds(1))
                continue
            }
            await clock.advance(by: next - now)
        }
        await courier.close()
        return summarize(scenario, rules, requests: log.withLock { $0 }, sentAt: sentAt, poison: poison)
    }

    private static func summarize(
        _ scenario: Scenario, _ rules: Rules, requests: [Request], sentAt: [MessageID: Double], poison: MessageID?
    ) -> Result {
        var deliveredAt: [MessageID: Double] = [:]
        for request in requests where request.succeeded { deliveredAt[request.id] = request.seconds }
        let latencies = deliveredAt.compactMap { id, at in sentAt[id].map { at - $0 } }.sorted()
        let end = poison == nil ? (requests.last?.seconds ?? 0) : scenario.horizon.seconds
        var result = Result(
            rules: rules, sent: sentAt.count, delivered: latencies.count, latencies: latencies,
            requests: requests.count, seconds: end)
        if let outage = scenario.server.outage?.seconds {
            result.requestsDuringOutage = requests.filter { $0.seconds < outage }.count
            if latencies.count == sentAt.count {
                result.lastDeliveredAfterOutage = (deliveredAt.values.max() ?? 0) - outage
            }
        }
        if let poison {
            let times = requests.filter { $0.id == poison }.map(\.seconds)
            result.poisonFirstHour = times.filter { $0 < 3_600 }.count
            let hoursAfter = (scenario.horizon.seconds - 3_600) / 3_600
            result.poisonPerHourAfter = Double(times.filter { $0 >= 3_600 }.count) / max(hoursAfter, 1)
        }
        return result
    }

    /// The `p`-th percentile (0...1) of `sorted` (ascending), nearest rank; NaN if it is empty.
    public static func percentile(_ p: Double, of sorted: [Double]) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count - 1, max(0, rank - 1))]
    }

    static let poisonBody = Array(#"{"poison":true}"#.utf8)
    static let destination = URL(string: "https://retry-tail.example/inbox")!
}

import CourierKit
import FlakyServer
import Foundation

// `courier-bench --outage SECONDS` (make bench-outage): issue 11's scenarios on loopback, real
// time, default retry policy, with destination backoff on and off in turn.
// 1. 500 messages; the server answers 503 (Retry-After: 1) for SECONDS, then 200: requests
//    during the outage, and how long after recovery the last message arrived.
// 2. 400 messages, every other one to a port where nothing listens: how many of the live
//    server's 200 it accepted within 2 s and within 30 s.

func outageScenarios(seconds outage: Int, root: URL) async throws {
    for backoff in [DestinationBackoff.disabled, DestinationBackoff()] {
        let label = backoff.isEnabled ? "destination backoff on " : "destination backoff off"
        var down = FlakyServer.Behavior(failureRate: 0, seed: 11)
        down.unavailableRate = 1
        let server = try await FlakyServer(behavior: down)
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true  // a scratch directory, in tmp
        config.destinationBackoff = backoff
        let dir = root.appendingPathComponent("outage-\(backoff.isEnabled)")
        let courier = try Courier(directory: dir, configuration: config)
        let url = await server.url
        let start = ContinuousClock.now
        for i in 0..<500 { try courier.send(["n": i, "text": "hello"], to: url) }
        try await Task.sleep(until: start.advanced(by: .seconds(outage)))
        let during = server.statistics.requests
        server.setBehavior(.init(failureRate: 0, seed: 11))
        let recovered = ContinuousClock.now
        await courier.waitUntilIdle()
        let drain = seconds(recovered.duration(to: .now))
        line(
            "\(label): \(outage) s of 503s, 500 messages",
            "\(during) requests during the outage; last delivered \(String(format: "%.1f", drain)) s after recovery")
        await courier.close()
        await server.stop()
    }
    for backoff in [DestinationBackoff.disabled, DestinationBackoff()] {
        let label = backoff.isEnabled ? "destination backoff on " : "destination backoff off"
        let server = try await FlakyServer(behavior: .init(failureRate: 0, seed: 12))
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true  // a scratch directory, in tmp
        config.destinationBackoff = backoff
        let courier = try Courier(
            directory: root.appendingPathComponent("dead-\(backoff.isEnabled)"), configuration: config)
        let live = await server.url
        let dead = URL(string: "http://127.0.0.1:\(try FlakyServer.unusedLoopbackPort())/inbox")!
        let start = ContinuousClock.now
        for i in 0..<400 { try courier.send(["n": i], to: i.isMultiple(of: 2) ? live : dead) }
        try await Task.sleep(until: start.advanced(by: .seconds(2)))
        let early = server.statistics.acceptedKeys
        while server.statistics.acceptedKeys < 200 && start.duration(to: .now) < .seconds(30) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let all = seconds(start.duration(to: .now))
        line(
            "\(label): live server beside a dead port",
            "\(early) of 200 accepted within 2 s; \(server.statistics.acceptedKeys) after "
                + "\(String(format: "%.1f", all)) s"
        )
        await courier.close()
        await server.stop()
    }
}

/// `courier-bench --flaky N`: N messages to a server failing half of all requests at random
/// (the first user's), default retry policy, destination backoff off then on: seconds until
/// every message is delivered, requests made, and how often the destination was considered down.
func flakyScenario(_ count: Int, root: URL) async throws {
    for backoff in [DestinationBackoff.disabled, DestinationBackoff()] {
        let label = backoff.isEnabled ? "destination backoff on " : "destination backoff off"
        let server = try await FlakyServer(behavior: .init(failureRate: 0.5, seed: 13))
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true  // a scratch directory, in tmp
        config.destinationBackoff = backoff
        let courier = try Courier(
            directory: root.appendingPathComponent("flaky-\(backoff.isEnabled)"), configuration: config)
        let downs = DownCounter()
        let listener = Task { for await event in courier.events() { if case .destinationDown = event { downs.add() } } }
        let url = await server.url
        let start = ContinuousClock.now
        for i in 0..<count { try courier.send(["n": i, "text": "hello"], to: url) }
        await courier.waitUntilIdle()
        let elapsed = seconds(start.duration(to: .now))
        line(
            "\(label): \(count) messages, 50% random 500s",
            "all delivered in \(String(format: "%.1f", elapsed)) s; \(server.statistics.requests) requests; down "
                + "\(downs.value) times"
        )
        await courier.close()
        listener.cancel()
        await server.stop()
    }
}

final class DownCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.withLock { n += 1 } }
    var value: Int { lock.withLock { n } }
}

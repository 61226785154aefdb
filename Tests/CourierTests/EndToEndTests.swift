@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import FlakyServer
import Foundation
import Testing

/// Real HTTP over 127.0.0.1 against the in-process flaky server, through the platform's
/// default transport. Backoff still runs on a manual clock: each round lets every in-flight
/// request finish, then advances virtual time past every delay. Bounded in rounds.
@Suite(.serialized) struct EndToEndTests {
    func drain(_ courier: Courier, _ clock: ManualClock, rounds: Int = 80) async {
        for _ in 0..<rounds where courier.pendingCount > 0 {
            await courier.settle()
            await clock.advance(by: .seconds(2))
        }
    }

    func configuration(_ clock: ManualClock, concurrency: Int = 8) -> Courier.Configuration {
        var c = Courier.Configuration()
        c.allowsPurgeableDirectory = true
        c.clock = clock
        c.retry = RetryPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(500))
        c.maximumConcurrentDeliveries = concurrency
        // Exactly `concurrency` in flight: these tests step virtual time by 2 s, and a paced
        // destination (the adaptive limit's answer to 429s) starts one request per step there.
        // The adaptive limit is tested on virtual time in fine steps (AdaptiveDeliveryTests).
        c.concurrencyLimit = .fixed
        // Real time (the default transport's clock): long enough that a request the server
        // answered is never timed out and sent again when the suite runs slowly (ThreadSanitizer,
        // all tests in parallel: one TSan run took 118 s here and saw 6 such duplicates at 10 s).
        c.requestTimeout = .seconds(60)
        return c
    }

    @Test func aThousandMessagesAtFiftyPercentFailuresAllArriveExactlyOnce() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0.5, seed: 1))
        let url = await server.url
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let courier = try Courier(directory: dir.url, configuration: configuration(clock))
        let callbacks = CallbackCounts()
        var ids: [MessageID] = []
        for i in 0..<1000 {
            ids.append(try courier.send(["text": "message \(i)"], to: url, onDelivered: { callbacks.add($0) }))
        }
        await drain(courier, clock)
        #expect(courier.pendingCount == 0)
        for id in ids { try await courier.delivered(id) }
        await courier.close()
        await server.stop()
        let stats = server.statistics
        #expect(stats.acceptedKeys == 1000, "every message arrived")
        #expect(stats.distinctKeys == 1000)
        #expect(stats.duplicateAccepts == 0)
        #expect(stats.answered[500, default: 0] > 700, "the server really failed about half the time")
        #expect(callbacks.counts.count == 1000 && callbacks.counts.values.allSatisfy { $0 == 1 },
                "each callback fired once")
    }

    @Test func dropsRateLimitsAndFailuresTogetherStillDeliverEverything() async throws {
        let behavior = FlakyServer.Behavior(failureRate: 0.4, dropRate: 0.1, rateLimitRate: 0.05, retryAfterSeconds: 1,
                                            seed: 2)
        let server = try await FlakyServer(behavior: behavior)
        let url = await server.url
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let courier = try Courier(directory: dir.url, configuration: configuration(clock))
        let events = EventLog(courier.events())
        let ids = try (0..<300).map { try courier.send(["n": $0], to: url) }
        await drain(courier, clock)
        for id in ids { try await courier.delivered(id) }
        await courier.close()
        await server.stop()
        await events.finish()
        let stats = server.statistics
        #expect(stats.acceptedKeys == 300)
        #expect(stats.dropped > 10 && stats.answered[429, default: 0] > 3)
        let drops = events.events.filter {
            if case .failed(_, _, .failure(let f), _) = $0 { return f.kind == .connectionClosed }
            return false
        }
        #expect(drops.count == stats.dropped, "each drop is reported as a closed connection, at once")
    }

    @Test func aServerThatIsDownUntilItRecoversGetsEverythingAfterwards() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 1, seed: 3))
        let url = await server.url
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let courier = try Courier(directory: dir.url, configuration: configuration(clock, concurrency: 4))
        let ids = try (0..<50).map { try courier.send(["n": $0], to: url) }
        await drain(courier, clock, rounds: 5)
        #expect(courier.pendingCount == 50)
        server.setBehavior(.init(failureRate: 0, seed: 4))
        await drain(courier, clock)
        for id in ids { try await courier.delivered(id) }
        await courier.close()
        await server.stop()
        #expect(server.statistics.acceptedKeys == 50)
    }
}

@Suite struct URLSessionTransportTests {
    /// URLSession is selectable on Linux (the default on Apple platforms). Against a server
    /// that never drops connections it delivers; with drops it hangs to its timeout on Linux,
    /// which is why it is not the Linux default.
    @Test(.timeLimit(.minutes(1)))
    func urlSessionTransportDeliversAgainstAServerThatDoesNotDrop() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0.5, seed: 5))
        let url = await server.url
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        config.clock = clock
        config.transport = URLSessionTransport()
        config.retry = RetryPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(100))
        let courier = try Courier(directory: dir.url, configuration: config)
        let ids = try (0..<30).map { try courier.send(["n": $0], to: url) }
        for _ in 0..<60 where courier.pendingCount > 0 {
            await courier.settle()
            await clock.advance(by: .seconds(1))
        }
        for id in ids { try await courier.delivered(id) }
        await courier.close()
        await server.stop()
        #expect(server.statistics.acceptedKeys == 30)
    }
}

final class CallbackCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var map: [MessageID: Int] = [:]
    func add(_ id: MessageID) { lock.withLock { map[id, default: 0] += 1 } }
    var counts: [MessageID: Int] { lock.withLock { map } }
}

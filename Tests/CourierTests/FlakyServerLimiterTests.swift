@_spi(CourierTesting) import CourierKit
import CourierLog
import FlakyServer
import Foundation
import Testing

/// The loopback server's rate limiter and latency (`make bench-drain`, issue 24), as a client
/// sees them: a token bucket serves its burst, then refuses at once with its status and
/// `Retry-After`, and counts each refusal.
@Suite(.timeLimit(.minutes(1))) struct FlakyServerLimiterTests {
    static func post(_ transport: any DeliveryTransport, to url: URL, _ n: Int) async -> DeliveryOutcome {
        await transport.deliver(DeliveryRequest(url: url, headers: ["Idempotency-Key": "key-\(n)"],
                                                body: Data("{}".utf8), timeout: .seconds(10), messageID: MessageID(),
                                                attempt: 1))
    }

    @Test(arguments: [(503, nil), (429, "1")] as [(Int, String?)])
    func aBucketServesItsBurstThenRefusesAtOnce(status: Int, retryAfter: String?) async throws {
        var behavior = FlakyServer.Behavior(failureRate: 0, seed: 1)
        // One token every 20 s: no refill while the test runs.
        behavior.limiter = .init(ratePerSecond: 0.05, burst: 10, status: status, retryAfter: retryAfter)
        let server = try await FlakyServer(behavior: behavior)
        let url = await server.url
        let transport = try Courier.Configuration().defaultTransport()
        var outcomes: [DeliveryOutcome] = []
        for n in 0..<12 { outcomes.append(await Self.post(transport, to: url, n)) }
        #expect(outcomes.prefix(10).allSatisfy { $0 == .response(status: 200) })
        #expect(outcomes.suffix(2).allSatisfy { $0 == .response(status: status, retryAfter: retryAfter) })
        #expect(server.statistics.refused == 2)
        #expect(server.statistics.answered[status] == 2)
        #expect(behavior.limiter?.idealDuration(of: 30) == .seconds(400), "20 past the burst, one per 20 s")
        await transport.shutdown()
        await server.stop()
    }

    @Test func latencyIsDrawnFromItsRange() async throws {
        var behavior = FlakyServer.Behavior(failureRate: 0, seed: 2)
        behavior.latency = .milliseconds(50) ... .milliseconds(60)
        let server = try await FlakyServer(behavior: behavior)
        let url = await server.url
        let transport = try Courier.Configuration().defaultTransport()
        let start = ContinuousClock.now
        for n in 0..<3 { #expect(await Self.post(transport, to: url, n) == .response(status: 200)) }
        // A lower bound only: the server waits at least 50 ms before each answer.
        #expect(start.duration(to: .now) >= .milliseconds(150))
        await transport.shutdown()
        await server.stop()
    }
}

/// The line `flaky-server` prints for each request (issue 45), read from the sink the server is
/// given rather than from standard output.
@Suite(.timeLimit(.minutes(1))) struct FlakyServerLogTests {
    @Test func aPostIsLoggedWithItsIdempotencyKey() async throws {
        let lines = Locked<[String]>([])
        let server = try await FlakyServer(behavior: .init(failureRate: 0, seed: 3), host: "127.0.0.1") { line in
            lines.withLock { $0.append(line) }
        }
        let url = await server.url
        #expect(url.host == "127.0.0.1")
        let transport = try Courier.Configuration().defaultTransport()
        let before = Date()
        // Logged before the answer is written, so the line is there once the client has its 200.
        #expect(await FlakyServerLimiterTests.post(transport, to: url, 7) == .response(status: 200))
        await transport.shutdown()
        await server.stop()
        let logged = lines.value
        try #require(logged.count == 1)
        let fields = logged[0].split(separator: " ")
        #expect(fields.dropFirst().joined(separator: " ") == "POST /messages key=key-7 bytes=2 answer=200")
        // The arrival time: ISO 8601, UTC, with milliseconds.
        let time = String(fields[0])
        #expect(time.count == 24 && time.hasSuffix("Z") && time.dropFirst(19).hasPrefix("."))
        let arrived = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(time)
        #expect(abs(arrived.timeIntervalSince(before)) < 30)
    }
}

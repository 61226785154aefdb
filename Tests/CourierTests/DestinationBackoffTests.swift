@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import FlakyServer
import Foundation
import Testing

/// Backoff per destination: a server that is down sees one probe at a time, recovers into a
/// full-speed drain, and never holds back another destination.
@Suite struct DestinationBackoffTests {
    /// The scenario of issue 11 on virtual time: 500 messages, the server answers 503 for 30 s.
    @Test func aThirtySecondOutageCostsAtMostTwentyRequestsAndDrainsWithinAMinute() async throws {
        let result = try await outage(backoff: DestinationBackoff())
        #expect(result.duringOutage <= 20, "\(result)")
        #expect(result.drainSeconds <= 60, "\(result)")
        print("destination backoff on, virtual time: \(result)")
        #expect(result.events.contains {
            if case .destinationDown(let o, 5) = $0 { o.absoluteString == "https://example.com:443" } else { false }
        })
        #expect(result.events.contains {
            if case .destinationRecovered(let o, _, let n) = $0 {
                o.absoluteString == "https://example.com:443" && n > 400
            } else { false }
        })
    }

    /// The same outage with destination backoff and the retry budget off: every message keeps
    /// its own schedule, so the server is stormed and the backlog drains late (what the
    /// defaults prevent).
    @Test func withoutDestinationBackoffOrRetryBudgetTheSameOutageIsAStorm() async throws {
        let result = try await outage(backoff: .disabled, budget: .disabled)
        #expect(result.duringOutage > 1_000, "\(result)")
        print("destination backoff and retry budget off, virtual time: \(result)")
        #expect(!result.events.contains { if case .destinationDown = $0 { true } else { false } })
    }

    /// With destination backoff off, the retry budget alone bounds the outage's load: the 500
    /// first attempts, then retries at most its 100 tokens and 1 a second (no 2xx came).
    @Test func withoutDestinationBackoffTheRetryBudgetBoundsTheSameOutage() async throws {
        let result = try await outage(backoff: .disabled)
        #expect(result.duringOutage <= 500 + 100 + 30, "\(result)")
        #expect(result.drainSeconds <= 60, "\(result)")
        print("destination backoff off, retry budget on, virtual time: \(result)")
    }

    struct OutageResult: CustomStringConvertible {
        var duringOutage: Int
        var drainSeconds: Double
        var events: [CourierEvent]
        var description: String {
            "\(duringOutage) requests during the outage, drained \(drainSeconds) s after recovery"
        }
    }

    private func outage(backoff: DestinationBackoff, budget: RetryBudget = RetryBudget()) async throws
        -> OutageResult
    {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let up = Flag()
        let transport = ScriptedTransport { _ in up.value ? .response(status: 200) : .response(status: 503) }
        var config = testConfiguration(clock: clock, transport: transport, jitter: .full)
        config.destinationBackoff = backoff
        config.retryBudget = budget
        let courier = try Courier(directory: dir.url, configuration: config)
        let recorder = EventLog(courier.events())
        for i in 0..<500 { try courier.send(["n": i], to: inbox) }
        let step = Duration.milliseconds(100)
        // 300 steps of 100 ms: the outage.
        for _ in 0..<300 {
            await courier.settle()
            await clock.advance(by: step)
        }
        await courier.settle()
        let duringOutage = transport.requests.count
        up.value = true
        var drained = Duration.zero
        // At most 120 s more, in steps: the drain.
        while courier.pendingCount > 0 && drained < .seconds(120) {
            await clock.advance(by: step)
            drained += step
            await courier.settle()
        }
        await courier.close()
        await recorder.finish()
        return OutageResult(duringOutage: duringOutage, drainSeconds: drained.seconds, events: recorder.events)
    }

    /// Connection refused at one destination: it goes down after five attempts, and the live
    /// destination's 200 messages all go out before any time passes.
    @Test func aRefusingDestinationNeverHoldsBackAnother() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let dead = URL(string: "http://127.0.0.1:9/inbox")!
        let transport = ScriptedTransport { request in
            request.url == dead ? .failure(TransportFailure(.connectionFailed, "refused")) : .response(status: 200)
        }
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: clock, transport: transport))
        for i in 0..<400 { try courier.send(["n": i], to: i.isMultiple(of: 2) ? inbox : dead) }
        await courier.settle()
        let toDead = transport.requests.filter { $0.url == dead }.count
        #expect(courier.pendingCount == 200, "every live message delivered at once")
        #expect(toDead <= 5 + 3, "five failures make it down; at most three more were in flight")
        // One probe per policy delay from now on: 1 s, 2 s, 4 s (no jitter).
        await clock.advance(by: .seconds(1))
        await courier.settle()
        #expect(transport.requests.filter { $0.url == dead }.count == toDead + 1)
        await courier.close()
    }

    /// A destination that times out (a blackholed host) holds at most one slot once it is
    /// down: the others proceed at full concurrency beside its single probe.
    @Test func aTimingOutDestinationHoldsAtMostOneSlotOnceDown() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let dead = URL(string: "https://blackhole.example/inbox")!
        let transport = BlackholeTransport(dead: dead, clock: clock)
        var config = testConfiguration(clock: clock, transport: transport)
        config.requestTimeout = .seconds(30)
        let courier = try Courier(directory: dir.url, configuration: config)
        for i in 0..<40 { try courier.send(["n": i], to: dead) }
        var live: [MessageID] = []
        for i in 0..<200 { live.append(try courier.send(["n": i], to: inbox)) }
        // The four slots go to the blackholed destination first (sent first). Two rounds of
        // four 30 s timeouts make it down (five in a row).
        await transport.waitForDeadRequests(4)
        await clock.advance(by: .seconds(30))
        await transport.waitForDeadRequests(8)
        await clock.advance(by: .seconds(30))
        // Down now: the live messages go out without waiting for another timeout.
        for id in live { try await courier.delivered(id) }
        #expect(transport.deadRequests == 8)
        await clock.advance(by: .seconds(1))  // the first probe
        await transport.waitForDeadRequests(9)
        #expect(transport.deadInFlight == 1)
        #expect(transport.maximumDeadInFlightAfter(downAt: 8) == 1, "the probe alone")
        #expect(courier.pendingCount == 40, "only the blackholed destination's messages wait")
        await courier.close()
    }

    @Test func anAnsweredProbeMakesTheWaitingMessagesDueWithoutResettingTheirAttempts() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let up = Flag()
        let transport = ScriptedTransport { _ in
            up.value ? .response(status: 200) : .failure(TransportFailure(.connectionClosed, "reset"))
        }
        var config = testConfiguration(clock: clock, transport: transport)
        config.maximumConcurrentDeliveries = 1
        let courier = try Courier(directory: dir.url, configuration: config)
        for i in 0..<10 { try courier.send(["n": i], to: inbox) }
        await courier.settle()
        #expect(transport.requests.count == 5, "down after five; the rest wait")
        up.value = true
        await clock.advance(by: .seconds(1))  // the first probe (1 s, no jitter)
        await courier.waitUntilIdle()
        let attempts = transport.requests.map(\.attempt)
        #expect(attempts.filter { $0 == 2 }.count == 5, "the five that failed go again as attempt 2")
        #expect(attempts.count == 15)
        #expect(clock.now.offset == .seconds(1), "no message waited for its own backoff")
        await courier.close()
    }

    @Test func originsNameSchemeHostAndPort() {
        #expect(OriginTable.origin(of: "https://Example.com/a?b") == "https://example.com:443")
        #expect(OriginTable.origin(of: "https://example.com:443/other") == "https://example.com:443")
        #expect(OriginTable.origin(of: "http://example.com/x") == "http://example.com:80")
        #expect(OriginTable.origin(of: "http://user@127.0.0.1:8080/x") == "http://127.0.0.1:8080")
    }

    @Test func whatAnOutcomeSaysAboutItsDestination() {
        for status in [200, 204, 301, 400, 401, 404, 409] {
            #expect(Governor.signal(for: .response(status: status)) == .healthy, "\(status)")
        }
        for status in [408, 500, 502, 504] {
            #expect(Governor.signal(for: .response(status: status)) == .failing, "\(status)")
        }
        for status in [429, 503] {
            #expect(Governor.signal(for: .response(status: status)) == .overloaded, "\(status)")
        }
        for kind: TransportFailure.Kind in [.connectionClosed, .connectionFailed, .tls] {
            #expect(Governor.signal(for: .failure(TransportFailure(kind, ""))) == .failing, "\(kind)")
        }
        #expect(Governor.signal(for: .failure(TransportFailure(.timeout, ""))) == .timedOut)
        #expect(Governor.signal(for: .failure(TransportFailure(.other, ""))) == .neutral)
    }

    /// Loopback, real time: the server answers 503 (Retry-After: 1) for 3 s, then recovers.
    @Test(.timeLimit(.minutes(1))) func aLoopbackOutageIsProbedAndDrainsAtOnceAfterRecovery() async throws {
        var outage = FlakyServer.Behavior(failureRate: 0, seed: 1)
        outage.unavailableRate = 1
        let server = try await FlakyServer(behavior: outage)
        let dir = TemporaryDirectory()
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        config.retry = RetryPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1))
        config.durability = .never
        let courier = try Courier(directory: dir.url, configuration: config)
        let url = await server.url
        for i in 0..<100 { try courier.send(["n": i], to: url) }
        try await Task.sleep(for: .seconds(3))
        let duringOutage = server.statistics.requests
        server.setBehavior(.init(failureRate: 0, seed: 1))
        let recovered = ContinuousClock.now
        await courier.waitUntilIdle()
        let drain = recovered.duration(to: .now)
        print("loopback outage: \(duringOutage) requests in 3 s of 503s, drained \(drain) after recovery")
        #expect(duringOutage <= 20)
        // The next probe is at most a couple of seconds away (0.6 s alone). The bound only
        // catches a drain that waits out backoff: with the whole suite running on 2 cores it
        // took 6.5–7.4 s (2026-11-23). `make bench-outage` measures the drain.
        #expect(drain < .seconds(30))
        await courier.close()
        await server.stop()
    }

    /// Loopback, real time: every other message goes to a port where nothing listens.
    @Test(.timeLimit(.minutes(1))) func aDeadPortBesideALiveServerDoesNotSlowIt() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0, seed: 1))
        let dir = TemporaryDirectory()
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        config.durability = .never
        let courier = try Courier(directory: dir.url, configuration: config)
        let live = await server.url
        let dead = URL(string: "http://127.0.0.1:\(try FlakyServer.unusedLoopbackPort())/inbox")!
        let start = ContinuousClock.now
        for i in 0..<400 { try courier.send(["n": i], to: i.isMultiple(of: 2) ? live : dead) }
        var liveDone = Duration.zero
        while courier.pendingCount > 200 && start.duration(to: .now) < .seconds(30) {
            try await Task.sleep(for: .milliseconds(20))
        }
        liveDone = start.duration(to: .now)
        let accepted = server.statistics.acceptedKeys
        print("dead port beside a live server: the live one accepted \(accepted) of 200 in \(liveDone)")
        #expect(accepted == 200)
        // 0.2 s alone, 12.5–13.4 s with the whole suite on 2 cores (2026-11-23); before
        // destination backoff, 8 of 200 in 2 s, so about 50 s for all: the loop's 30 s bound
        // and `accepted == 200` catch that. `make bench-outage` measures it.
        #expect(liveDone < .seconds(30))
        await courier.close()
        await server.stop()
    }
}

/// A boolean shared with a transport's script.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool {
        get { lock.withLock { flag } }
        set { lock.withLock { flag = newValue } }
    }
}

/// Requests to `dead` wait out the request timeout on the manual clock, then time out; the
/// others answer 200 at once. Records how many dead requests were in flight at each start.
final class BlackholeTransport: DeliveryTransport, @unchecked Sendable {
    private let lock = NSLock()
    private let dead: URL
    private let clock: ManualClock
    private var inFlight = 0
    /// In flight at the start of each dead request, in order.
    private var atStart: [Int] = []

    init(dead: URL, clock: ManualClock) {
        self.dead = dead
        self.clock = clock
    }

    var deadInFlight: Int { lock.withLock { inFlight } }
    var deadRequests: Int { lock.withLock { atStart.count } }
    private var countWaiters: [(Int, CheckedContinuation<Void, Never>)] = []

    /// Returns once `count` requests to the dead destination have started.
    func waitForDeadRequests(_ count: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = lock.withLock { () -> Bool in
                if atStart.count >= count { return true }
                countWaiters.append((count, c))
                return false
            }
            if ready { c.resume() }
        }
    }

    /// The most dead requests in flight at once from the `n`-th dead request on (1-based).
    func maximumDeadInFlightAfter(downAt n: Int) -> Int { lock.withLock { atStart.dropFirst(n).max() ?? 0 } }

    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        guard request.url == dead else { return .response(status: 200) }
        let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            inFlight += 1
            atStart.append(inFlight)
            let ready = countWaiters.filter { $0.0 <= atStart.count }.map(\.1)
            countWaiters.removeAll { $0.0 <= atStart.count }
            return ready
        }
        ready.forEach { $0.resume() }
        defer { lock.withLock { inFlight -= 1 } }
        do {
            try await clock.sleep(until: clock.now.advanced(by: request.timeout), tolerance: nil)
        } catch {
            return .failure(TransportFailure(.cancelled, "cancelled"))
        }
        return .failure(TransportFailure(.timeout, "no answer within \(request.timeout)"))
    }
}

@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// The retry budget per destination (`RetryBudget`), on the manual clock: retries never exceed
/// it over any interval, a retry without a token waits and is never dropped, and a first
/// attempt never waits for one.
@Suite struct RetryBudgetTests {
    @Test func aBucketRefillsBySuccessesAndTimeUpToItsCapacity() {
        let budget = RetryBudget(capacity: 3, tokensPerSuccess: 2, tokensPerSecond: 1)
        var governor = Governor(Governor.Rules(budget: budget))
        func take(_ now: UInt64) -> Bool { governor.takeToken(at: now) }
        for _ in 0..<3 { #expect(take(0)) }
        #expect(!take(0), "empty")
        #expect(governor.nextTokenMilliseconds(at: 0) == 1_000)
        #expect(!take(999))
        #expect(take(1_000), "one a second")
        governor.paySuccess(at: 1_000)
        #expect(take(1_000) && take(1_000))
        #expect(!take(1_000), "two per success")
        #expect(governor.tokens(at: 60_000) == 3, "never past its capacity")
        var free = Governor(Governor.Rules(budget: .disabled))
        #expect((0..<1_000).allSatisfy { _ in free.takeToken(at: 0) })
    }

    /// A retry due now that finds no token is due at the next one, and a retry due later than
    /// that keeps its due time: a missing token never brings a message forward. A first attempt
    /// passes it.
    @Test func aRetryWithoutATokenWaitsForTheNextTokenAndNeverComesForward() {
        var p = Projection(fifoPerDestination: false)
        p.origins.rules.budget = RetryBudget(capacity: 1, tokensPerSuccess: 0, tokensPerSecond: 1)
        p.apply(.enqueued(state(1, due: 0, attempts: 1)), address: address(1))
        p.apply(.enqueued(state(2, due: 0, attempts: 1)), address: address(2))
        #expect(p.takeNext(.now, nowMilliseconds: 0)?.slot.id == state(1).id, "the one token")
        #expect(p.takeNext(.now, nowMilliseconds: 0) == nil)
        #expect(p.slot(of: state(2).id)?.dueMilliseconds == 1_000, "due at the next token")
        p.apply(.enqueued(state(3, due: 0)), address: address(3))
        #expect(p.takeNext(.now, nowMilliseconds: 0)?.slot.id == state(3).id, "a first attempt pays nothing")
        #expect(p.takeNext(.now, nowMilliseconds: 1_000)?.slot.id == state(2).id)
        #expect(p.brokenInvariant() == nil)
    }

    /// A message a hand-off parked before it was due, taken by the engine at once as the limit
    /// allows, keeps its later due time when there is no token.
    @Test func aParkedRetryWithoutATokenKeepsItsLaterDueTime() {
        var p = Projection(fifoPerDestination: false)
        p.origins.rules = Governor.Rules(
            concurrency: .fixed, maximumConcurrency: 1,
            budget: RetryBudget(capacity: 1, tokensPerSuccess: 0, tokensPerSecond: 1))
        p.apply(.enqueued(state(1, due: 0, attempts: 1)), address: address(1))
        p.apply(.enqueued(state(2, due: 5_000, attempts: 1)), address: address(2))
        #expect(p.takeNext(.now, nowMilliseconds: 0)?.slot.id == state(1).id, "the one token")
        #expect(p.take(.whenAllowed, limit: 1, nowMilliseconds: 0).isEmpty, "at its limit: parked")
        #expect(p.slot(of: state(2).id)?.flags.contains(.parked) == true)
        p.remove(state(1).id)
        #expect(p.takeNext(.now, nowMilliseconds: 10) == nil, "no token")
        #expect(p.slot(of: state(2).id)?.dueMilliseconds == 5_000, "the next token (1 s) does not bring it forward")
        #expect(p.brokenInvariant() == nil)
    }

    /// I3: over every interval [t₀, t₁] of a run against a server failing 90% of all requests
    /// at random, retries started ≤ capacity + 2 × (2xx in it) + 1/s × (t₁ − t₀); and every
    /// message is delivered.
    @Test func retriesNeverExceedTheBudgetOverAnyInterval() async throws {
        let clock = ManualClock()
        let random = Locked(SplitMix64(seed: 9))
        let log = Locked<[(offset: Duration, attempt: Int, succeeded: Bool)]>([])
        let transport = ScriptedTransport { request in
            let succeeded = random.withLock { $0.next() } % 10 == 0
            log.withLock { $0.append((clock.now.offset, request.attempt, succeeded)) }
            return .response(status: succeeded ? 200 : 500)
        }
        var config = testConfiguration(clock: clock, transport: transport, jitter: .full)
        config.destinationBackoff = .disabled  // every charged start is then a retry (no probes)
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: config)
        for n in 0..<200 { try courier.send(["n": n], to: inbox) }
        // Bounded: 1 s steps, 3 hours of virtual time at most.
        for _ in 0..<10_800 where courier.pendingCount > 0 {
            await courier.settle()
            await clock.advance(by: .seconds(1))
        }
        #expect(courier.pendingCount == 0, "every message delivered: a retry waits, it is never dropped")
        await courier.close()
        let starts = log.withLock { $0 }
        // Prefix sums over the starts in time order: retries and 2xx up to each.
        var retries = [0], successes = [0]
        for start in starts {
            retries.append(retries.last! + (start.attempt > 1 ? 1 : 0))
            successes.append(successes.last! + (start.succeeded ? 1 : 0))
        }
        var tightest = Double.infinity
        for a in starts.indices {
            for b in starts.indices[a...] {
                let seconds = (starts[b].offset - starts[a].offset).seconds
                let allowed = 100 + 2 * Double(successes[b + 1] - successes[a]) + seconds
                let used = Double(retries[b + 1] - retries[a])
                tightest = min(tightest, allowed - used)
            }
        }
        #expect(tightest >= -1e-9, "a window took \(-tightest) retries more than the budget allows")
        let span = starts.last!.offset.seconds
        print("""
            retry budget, 90% failing, virtual time: 200 delivered in \(Int(span)) s, \(starts.count) requests \
            (\(String(format: "%.2f", Double(starts.count) / span)) a second); tightest window \(tightest) tokens short
            """)
    }

    /// A retry waiting for a token does not hold back a message sent after it.
    @Test func aFirstAttemptNeverWaitsForAToken() async throws {
        let clock = ManualClock()
        let times = Locked<[String: [Duration]]>([:])
        let transport = ScriptedTransport { request in
            let body = String(decoding: request.body, as: UTF8.self)
            times.withLock { $0[body, default: []].append(clock.now.offset) }
            return body.contains("new") ? .response(status: 200) : .response(status: 500)
        }
        var config = testConfiguration(clock: clock, transport: transport)
        config.retryBudget = RetryBudget(capacity: 1, tokensPerSuccess: 0, tokensPerSecond: 0.01)
        config.destinationBackoff = .disabled
        config.concurrencyLimit = .fixed
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: config)
        try courier.send(["m": "old-1"], to: inbox)
        try courier.send(["m": "old-2"], to: inbox)
        for _ in 0..<20 {  // 10 s: each old one failed once and was due again after 1 s; one token
            await courier.settle()
            await clock.advance(by: .milliseconds(500))
        }
        let retried = times.withLock { $0.values.map(\.count).reduce(0, +) }
        #expect(retried == 3, "two first attempts and the one retry the single token paid for")
        let sentAt = clock.now.offset
        let new = try courier.send(["m": "new"], to: inbox)
        await courier.settle()
        try await courier.delivered(new)
        #expect(times.withLock { $0["{\"m\":\"new\"}"] } == [sentAt], "sent at once, while a retry waits")
        #expect(courier.pendingCount == 2, "the old ones wait for tokens; none is dropped")
        await courier.close()
    }
}

@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import FlakyServer
import Testing

/// The adaptive concurrency limit, as a destination's `Governor` learns it, in virtual time (milliseconds): it grows on
/// success, is cut by refusals and timeouts once per round trip, paces a rate limiter at the
/// rate it accepts, starts again after an outage, and a fixed limit stays fixed.
@Suite struct ConcurrencyLimitTests {
    let policy = ConcurrencyLimit.adaptive
    let maximum = 64

    @Test func anUnknownDestinationStartsLow() {
        let flow = policy.initialFlow(maximum: maximum)
        #expect(flow.count == 4)
        #expect(policy.mayStart(flow, sending: 3, nowMilliseconds: 0))
        #expect(!policy.mayStart(flow, sending: 4, nowMilliseconds: 0))
        #expect(ConcurrencyLimit.adaptive.initialFlow(maximum: 2).count == 2, "never above the maximum")
    }

    @Test func theLimitDoublesEachRoundTripWhileRequestsSucceedAndStopsAtTheMaximum() {
        var flow = policy.initialFlow(maximum: maximum)
        var rounds = 0
        // Each round: a full window of successes, 100 ms each; each ended request is replaced
        // at once, as the engine does, so the limit stays in use.
        while flow.count < maximum && rounds < 20 {
            let window = flow.count
            for _ in 0..<window {
                policy.succeeded(&flow, latencyMilliseconds: 100, sending: flow.count,
                                 nowMilliseconds: UInt64(rounds * 100 + 100), maximum: maximum)
            }
            rounds += 1
        }
        #expect(rounds == 4, "4 → 8 → 16 → 32 → 64")
        #expect(flow.count == maximum)
        policy.succeeded(&flow, latencyMilliseconds: 100, sending: 64, nowMilliseconds: 500, maximum: maximum)
        #expect(flow.count == maximum)
    }

    @Test func aTrickleOfSuccessesDoesNotInflateTheLimit() {
        var flow = policy.initialFlow(maximum: maximum)
        for t in 0..<1_000 {
            policy.succeeded(&flow, latencyMilliseconds: 50, sending: 1,
                             nowMilliseconds: UInt64(t * 100 + 50), maximum: maximum)
        }
        #expect(flow.count == 4, "one in flight at a time proves nothing about 5")
    }

    @Test(arguments: [429, 503])
    func aRefusalForLoadCutsTheLimitOncePerRoundTrip(status: Int) {
        var flow = grown(to: 32)
        #expect(Governor.signal(for: .response(status: status)) == .overloaded)
        // Seconds after the last success: this refusal is not one in many answers.
        policy.refused(&flow, retryAfterMilliseconds: nil, startedMilliseconds: 5_000, nowMilliseconds: 5_010,
                       maximum: maximum)
        #expect(flow.count == 16)
        // The rest of the burst that started before the cut says nothing new.
        for _ in 0..<10 {
            policy.refused(&flow, retryAfterMilliseconds: nil, startedMilliseconds: 5_005, nowMilliseconds: 5_011,
                           maximum: maximum)
        }
        #expect(flow.count == 16)
        policy.refused(&flow, retryAfterMilliseconds: nil, startedMilliseconds: 5_020, nowMilliseconds: 5_030,
                       maximum: maximum)
        #expect(flow.count == 8, "a request started after the cut is refused too: cut again")
    }

    @Test func aTimeoutCutsTheLimit() {
        var flow = grown(to: 32)
        #expect(Governor.signal(for: .failure(TransportFailure(.timeout, "t"))) == .timedOut)
        policy.timedOut(&flow, startedMilliseconds: 1_000, nowMilliseconds: 31_000, maximum: maximum)
        #expect(flow.count == 16)
        #expect(flow.ratePerSecond == nil, "a timeout is about concurrency, not pace")
    }

    /// Latency is never load (a phone's queued requests and waking radio look like it): 5,000 2xx
    /// at 0–400 ms grow the limit to the maximum without a cut.
    @Test func latencyThatVariesAtRandomWithinARangeIsNotLoad() {
        var flow = policy.initialFlow(maximum: maximum)
        var random = SplitMix64(seed: 24)
        var t: UInt64 = 0
        for _ in 0..<5_000 {
            t += 5
            policy.succeeded(&flow, latencyMilliseconds: UInt64.random(in: 0...400, using: &random),
                             sending: flow.count, nowMilliseconds: t, maximum: maximum)
        }
        #expect(flow.count == maximum)
        #expect(flow.lastCutMilliseconds == nil)
    }

    @Test func retryAfterHoldsTheWholeDestination() {
        var flow = grown(to: 16)
        policy.refused(&flow, retryAfterMilliseconds: 1_000, startedMilliseconds: 5_000, nowMilliseconds: 5_010,
                       maximum: maximum)
        #expect(!policy.mayStart(flow, sending: 0, nowMilliseconds: 6_009))
        #expect(policy.mayStart(flow, sending: 0, nowMilliseconds: 6_010))
        // A stale refusal cuts nothing, but its Retry-After still holds.
        policy.refused(&flow, retryAfterMilliseconds: 2_000, startedMilliseconds: 5_000, nowMilliseconds: 5_020,
                       maximum: maximum)
        #expect(!policy.mayStart(flow, sending: 0, nowMilliseconds: 7_019))
    }

    @Test func aDestinationBackFromAnOutageStartsAsNew() {
        var flow = grown(to: 32)
        policy.refused(&flow, retryAfterMilliseconds: nil, startedMilliseconds: 5_000, nowMilliseconds: 5_010,
                       maximum: maximum)
        #expect(flow.ratePerSecond != nil)
        policy.recovered(&flow, maximum: maximum)
        #expect(flow == policy.initialFlow(maximum: maximum))
    }

    @Test func aFixedLimitStaysFixed() {
        let fixed = ConcurrencyLimit.fixed
        var flow = fixed.initialFlow(maximum: 4)
        #expect(flow.count == 4)
        for t in UInt64(0)..<100 {
            fixed.succeeded(&flow, latencyMilliseconds: t * 100, sending: 4,
                            nowMilliseconds: t + 1, maximum: 4)
            fixed.refused(&flow, retryAfterMilliseconds: 1_000, startedMilliseconds: t, nowMilliseconds: t + 1,
                          maximum: 4)
            fixed.timedOut(&flow, startedMilliseconds: t, nowMilliseconds: t + 1, maximum: 4)
            fixed.started(&flow, nowMilliseconds: t + 1)
        }
        #expect(flow.count == 4)
        #expect(flow.ratePerSecond == nil)
        #expect(fixed.mayStart(flow, sending: 3, nowMilliseconds: 101))
    }

    /// The limiter of issue 24 (20 requests/s, burst 10, refusals answered at once): 500
    /// requests, a 2 ms round trip. A concurrency limit alone would make hundreds of requests
    /// a second; the pace settles at the limiter's rate.
    @Test(arguments: [nil, 1_000] as [UInt64?])
    func aRateLimiterIsDrainedAtItsPaceWithFewRefusals(retryAfterMilliseconds: UInt64?) {
        let result = simulateLimiter(messages: 500, ratePerSecond: 20, burst: 10,
                                     retryAfterMilliseconds: retryAfterMilliseconds)
        let idealMilliseconds = (500.0 - 10) / 20 * 1_000
        #expect(result.delivered == 500)
        #expect(Double(result.elapsedMilliseconds) <= 1.25 * idealMilliseconds, "\(result)")
        #expect(Double(result.refused) < 0.25 * Double(result.requests), "\(result)")
        print("limiter, virtual time, Retry-After \(retryAfterMilliseconds.map(String.init) ?? "none"): \(result)")
    }

    /// A server with room to spare that refuses 1 request in 20 at random (no `Retry-After`):
    /// not a limiter, so the pace never binds and throughput holds.
    @Test func refusalsNowAndThenAtRandomDoNotThrottleADestination() {
        var flow = grown(to: 32)
        var random = SplitMix64(seed: 7)
        var t: UInt64 = 1_000
        var cuts = 0
        for _ in 0..<10_000 {
            t += 1
            if random.next() % 20 == 0 {
                let before = flow.lastCutMilliseconds
                policy.refused(&flow, retryAfterMilliseconds: nil, startedMilliseconds: t - 1, nowMilliseconds: t,
                               maximum: maximum)
                if flow.lastCutMilliseconds != before { cuts += 1 }
            } else {
                policy.succeeded(&flow, latencyMilliseconds: 1, sending: flow.count,
                                 nowMilliseconds: t, maximum: maximum)
            }
        }
        #expect(cuts == 0, "5 % refused is below the 1-in-10 a limiter shows")
        #expect(flow.ratePerSecond == nil && flow.count == maximum)
    }

    // MARK: Helpers

    /// A flow grown by slow start to `limit`, with 100 ms latencies.
    private func grown(to limit: Int) -> Governor.Flow {
        var flow = policy.initialFlow(maximum: maximum)
        var t: UInt64 = 0
        while flow.count < limit {
            t += 1
            policy.succeeded(&flow, latencyMilliseconds: 100, sending: flow.count,
                             nowMilliseconds: t + 100, maximum: maximum)
        }
        return flow
    }

    struct LimiterResult: CustomStringConvertible {
        var delivered = 0, requests = 0, refused = 0, elapsedMilliseconds: UInt64 = 0
        var description: String {
            "\(delivered) delivered in \(elapsedMilliseconds) ms, \(requests) requests, \(refused) refused"
        }
    }

    /// The test server's token bucket in front of it, in 1 ms steps; refused requests go back to the end
    /// of the queue, as the core's parked queue does. Bounded by 120 virtual seconds.
    func simulateLimiter(messages: Int, ratePerSecond: Double, burst: Int,
                         retryAfterMilliseconds: UInt64?) -> LimiterResult {
        let roundTripMilliseconds: UInt64 = 2
        var flow = policy.initialFlow(maximum: maximum)
        let bucket = FlakyServer.TokenBucket(ratePerSecond: ratePerSecond, burst: burst)
        var level = FlakyServer.TokenBucket.Level(full: bucket)
        var queued = messages
        var inFlight: [(end: UInt64, started: UInt64, accepted: Bool)] = []
        var result = LimiterResult()
        for now in UInt64(0)..<120_000 {
            let ended = inFlight.filter { $0.end <= now }
            inFlight.removeAll { $0.end <= now }
            for request in ended {
                if request.accepted {
                    result.delivered += 1
                    policy.succeeded(&flow, latencyMilliseconds: roundTripMilliseconds, sending: inFlight.count + 1,
                                     nowMilliseconds: now, maximum: maximum)
                } else {
                    result.refused += 1
                    queued += 1
                    policy.refused(&flow, retryAfterMilliseconds: retryAfterMilliseconds,
                                   startedMilliseconds: request.started, nowMilliseconds: now, maximum: maximum)
                }
            }
            if result.delivered == messages {
                result.elapsedMilliseconds = now
                return result
            }
            // Each turn starts one request: bounded by the queue.
            while queued > 0 && policy.mayStart(flow, sending: inFlight.count, nowMilliseconds: now) {
                policy.started(&flow, nowMilliseconds: now)
                queued -= 1
                result.requests += 1
                let accepted = level.take(bucket, at: .milliseconds(now))
                inFlight.append((now + roundTripMilliseconds, now, accepted))
            }
        }
        result.elapsedMilliseconds = 120_000
        return result
    }
}

/// The flow transitions one at a time, as the governor of a destination with `sending`
/// deliveries under way makes them: the tests above read the flow before and after.
private extension ConcurrencyLimit {
    func governor(
        _ flow: Governor.Flow, sending: Int = 0, maximum: Int, backoff: DestinationBackoff = .disabled
    ) -> Governor {
        var governor = Governor(Governor.Rules(concurrency: self, maximumConcurrency: maximum, backoff: backoff))
        governor.flow = flow
        governor.sending = sending
        return governor
    }

    func mayStart(_ flow: Governor.Flow, sending: Int, nowMilliseconds now: UInt64) -> Bool {
        governor(flow, sending: sending, maximum: Int.max).earliestStart(notBefore: now) == now
    }

    func started(_ flow: inout Governor.Flow, nowMilliseconds now: UInt64) {
        var governor = governor(flow, maximum: Int.max)
        _ = governor.start(message: 0, charged: false, at: now)
        flow = governor.flow
    }

    func succeeded(
        _ flow: inout Governor.Flow, latencyMilliseconds: UInt64?, sending: Int, nowMilliseconds now: UInt64,
        maximum: Int
    ) {
        var governor = governor(flow, sending: sending, maximum: maximum)
        governor.succeeded(latencyMilliseconds: latencyMilliseconds, nowMilliseconds: now)
        flow = governor.flow
    }

    func refused(
        _ flow: inout Governor.Flow, retryAfterMilliseconds: UInt64?, startedMilliseconds: UInt64,
        nowMilliseconds now: UInt64, maximum: Int
    ) {
        var governor = governor(flow, maximum: maximum)
        governor.refused(
            retryAfterMilliseconds: retryAfterMilliseconds, startedMilliseconds: startedMilliseconds,
            nowMilliseconds: now)
        flow = governor.flow
    }

    func timedOut(_ flow: inout Governor.Flow, startedMilliseconds: UInt64, nowMilliseconds now: UInt64, maximum: Int) {
        var governor = governor(flow, maximum: maximum)
        governor.timedOut(startedMilliseconds: startedMilliseconds, nowMilliseconds: now)
        flow = governor.flow
    }

    /// What an answered probe does to the flow (`Governor.observe`, `.recovered`).
    func recovered(_ flow: inout Governor.Flow, maximum: Int) {
        var governor = governor(flow, maximum: maximum, backoff: DestinationBackoff(failuresBeforeDown: 1))
        func answer(_ status: Int) -> Ending {
            Ending(
                attempt: Attempt(id: MessageID(), number: 1), outcome: .response(status: status),
                createdMilliseconds: 0, runner: .upload(ticket: 1))
        }
        _ = governor.observe(answer(500), message: 1, at: 10)
        guard governor.observe(answer(200), message: 1, at: 20) == .recovered(downMilliseconds: 10) else { return }
        flow = governor.flow
    }
}

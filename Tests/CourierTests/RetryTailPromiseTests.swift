import Foundation
import RetryScenarios
import Testing

/// Issue 36's targets, asserted on virtual time under the default rules (`RetryScenarios`, which
/// `make bench-drain` prints beside the same runs with the rules `.disabled`): a server failing
/// half of all requests at random delivers in seconds, not minutes; a poison message still
/// backs off; outages see a bounded load and end within a minute of the server's return; a
/// server failing 90% of all requests is drained, at a bounded rate. A change that brings the
/// tail back fails here, not in a benchmark nobody ran. Serialized: each run is CPU-bound
/// simulation, and side by side they would hold both of CI's cores from the real-time suites.
@Suite(.serialized, .timeLimit(.minutes(10))) struct RetryTailPromiseTests {
    /// Scenario `index` under the default rules; with `trafficEvery`, its steady traffic thinned
    /// to one message that often (the poison scenarios: the bench's 10,800 messages in 3 hours
    /// would cost `make test` a minute of CPU beside real-time suites; the window still holds
    /// enough answers, so the poison message's schedule is the same rule's).
    func run(_ index: Int, trafficEvery: Duration? = nil, seed: UInt64 = 36) async throws -> RetryScenarios.Result {
        var scenario = RetryScenarios.all[index]
        if let trafficEvery { scenario.steadyInterval = trafficEvery }
        let result = try await RetryScenarios.run(scenario, .defaults, seed: seed)
        print("retry tail, \(scenario.name)\(trafficEvery.map { ", one message every \($0)" } ?? ""): \(result)")
        return result
    }

    @Test func aThousandAtOnceToAServerFailingHalfTheTimeTakeSeconds() async throws {
        let r = try await run(0)
        #expect(r.delivered == r.sent)
        #expect(r.latencies.last! <= 20 && r.percentile(0.99) <= 15, "\(r)")
        #expect(r.requestsPerMessage <= 2.1, "\(r)")
    }

    @Test func threeHundredAtOnceWaitTwentySecondsAtMost() async throws {
        let r = try await run(1)
        #expect(r.delivered == r.sent)
        #expect(r.latencies.last! <= 20 && r.percentile(0.99) <= 15, "\(r)")
    }

    @Test(arguments: [2, 3])
    func steadyTrafficAtHalfFailuresWaitsSecondsAtMost(scenario: Int) async throws {
        let r = try await run(scenario)
        #expect(r.delivered == r.sent)
        #expect(r.percentile(0.99) <= 10 && r.latencies.last! <= 20, "\(r)")
    }

    /// Thin traffic, one message every 4 s for an hour: few messages pending, so one slot serves
    /// most of them in turn. A message's rate once left out every answer to its slot, most of the
    /// window: p99 12.4 s, max 91.2 s (the rate must leave out the message's own answers only).
    @Test func thinTrafficAtHalfFailuresWaitsSecondsAtMost() async throws {
        var scenario = RetryScenarios.all[3]
        scenario.steadyInterval = .seconds(4)
        scenario.steadyFor = .seconds(3_600)
        let r = try await RetryScenarios.run(scenario, .defaults)
        print("retry tail, one message every 4 s for an hour at 50%: \(r)")
        #expect(r.delivered == r.sent && r.percentile(0.99) <= 10 && r.latencies.last! <= 20, "\(r)")
    }

    /// A poison message's requests are random (full jitter up to 300 s: 24 an hour on average,
    /// give or take 5 in one hour), so the bounds hold for the mean of 4 runs (seeds), each 3 h.
    func poisonRuns(_ index: Int) async throws -> (firstHour: Double, perHourAfter: Double, p99: Double) {
        var runs: [RetryScenarios.Result] = []
        for seed: UInt64 in [36, 37, 38, 39] {
            runs.append(try await run(index, trafficEvery: .seconds(4), seed: seed))
        }
        let n = Double(runs.count)
        return (
            runs.map { Double($0.poisonFirstHour!) }.reduce(0, +) / n,
            runs.map { $0.poisonPerHourAfter! }.reduce(0, +) / n,
            runs.map { $0.percentile(0.99) }.max()!
        )
    }

    @Test func aPoisonMessageBesideHealthyTrafficBacksOffAsBefore() async throws {
        let r = try await poisonRuns(4)
        #expect(r.firstHour <= 40 && r.perHourAfter <= 24, "\(r)")
        #expect(r.p99 <= 0.1, "the others are not held back: \(r)")
    }

    /// Beside traffic failing half the time the poison message is a little busier after its
    /// first hour: 25.1 an hour over these 4 runs (22.5 in the bench's run at one message a
    /// second). A run of its failures now and then tips the destination down, and a recovery
    /// makes every parked message due at once, the poison one too. Bounded here at 26 an hour
    /// until recoveries keep a message's own later due time (the next step of issue 36).
    @Test func aPoisonMessageBesideTrafficAtHalfFailuresBacksOffToo() async throws {
        let r = try await poisonRuns(5)
        #expect(r.firstHour <= 45 && r.perHourAfter <= 26, "\(r)")
        #expect(r.p99 <= 10, "the others wait seconds at most: \(r)")
    }

    @Test func aMinuteOfOutageCostsTwentyRequestsAndEndsWithinAMinute() async throws {
        let r = try await run(6)
        #expect(r.requestsDuringOutage! <= 20 && r.lastDeliveredAfterOutage! <= 60, "\(r)")
    }

    @Test func anHourOfOutageCostsAHundredAndFiftyRequestsAtMost() async throws {
        let r = try await run(7)
        #expect(r.requestsDuringOutage! <= 150 && r.lastDeliveredAfterOutage! <= 60, "\(r)")
    }

    /// 200 messages, not the bench's 1,000 (a fifth of the CPU). Its rate over the run is the
    /// budget's: the first attempts, the 100 tokens, 2 per 2xx and 1 a second (the bench's 1,000
    /// average 1.40 requests a second over 2 hours, where the first minute weighs less).
    @Test func aServerFailingNinetyPercentIsDrainedWithinFourHoursAtABoundedRate() async throws {
        var scenario = RetryScenarios.all[8]
        scenario.atOnce = 200
        let r = try await RetryScenarios.run(scenario, .defaults)
        print("retry tail, 200 at once, 90% 500s: \(r)")
        #expect(r.delivered == r.sent && r.seconds <= 4 * 3_600, "\(r)")
        let budget = Double(r.sent) + 100 + 2 * Double(r.delivered) + r.seconds
        #expect(Double(r.requests) <= budget, "\(r.requests) requests against a budget of \(budget): \(r)")
    }

    @Test func theSameScenarioGivesTheSameFiguresEveryRun() async throws {
        let first = try await RetryScenarios.run(RetryScenarios.all[1], .defaults)
        let second = try await RetryScenarios.run(RetryScenarios.all[1], .defaults)
        #expect(first == second)
    }
}

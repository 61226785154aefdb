@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// When a destination is down and how often it is probed (`DestinationBackoff`), on the
/// manual clock: a server failing at random while it answers others is not down; a long outage
/// is probed 30–60 s apart, and a destination that comes back is found within a minute.
@Suite struct DestinationProbeTests {
    /// 100 messages, one at a time, to a server whose k-th request fails when k is even, and
    /// whose requests 60 to 69 all fail (a streak of bad luck after 60 answers at 50%).
    func randomFailuresWithAStreak(explained: RetryPolicy.ExplainedFailures) async throws -> [CourierEvent] {
        let clock = ManualClock()
        let requests = Counter()
        let transport = ScriptedTransport { _ in
            let k = requests.next() - 1
            return k % 2 == 0 || (60..<70).contains(k) ? .response(status: 500) : .response(status: 200)
        }
        var config = testConfiguration(clock: clock, transport: transport)
        config.retry.explainedFailures = explained
        config.concurrencyLimit = .fixed
        config.maximumConcurrentDeliveries = 1
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: config)
        let events = EventLog(courier.events())
        for n in 0..<100 { try courier.send(["n": n], to: inbox) }
        // Bounded: 250 ms steps, 10 minutes of virtual time at most.
        for _ in 0..<2_400 where courier.pendingCount > 0 {
            await courier.settle()
            await clock.advance(by: .milliseconds(250))
        }
        #expect(courier.pendingCount == 0)
        await courier.close()
        await events.finish()
        return events.events
    }

    @Test func aServerFailingAtRandomWhileItAnswersOthersIsNotDown() async throws {
        let isDown: (CourierEvent) -> Bool = { if case .destinationDown = $0 { true } else { false } }
        let events = try await randomFailuresWithAStreak(explained: RetryPolicy.ExplainedFailures())
        #expect(!events.contains(where: isDown), "11 failures in a row at a 50% rate are luck (14 would not be)")
        let without = try await randomFailuresWithAStreak(explained: .disabled)
        #expect(without.contains(where: isDown), "without the rule, 5 in a row make it down")
    }

    /// An hour of 500s from a destination that had answered nothing yet, 20 messages waiting.
    @Test func aLongOutageIsProbedThirtyToSixtySecondsApartAndFoundWithinAMinute() async throws {
        let clock = ManualClock()
        let up = Flag()
        let times = Locked<[Duration]>([])
        let transport = ScriptedTransport { _ in
            times.withLock { $0.append(clock.now.offset) }
            return up.value ? .response(status: 200) : .response(status: 500)
        }
        let config = testConfiguration(clock: clock, transport: transport, jitter: .full)
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: config)
        for n in 0..<20 { try courier.send(["n": n], to: inbox) }
        let step = Duration.milliseconds(500)
        // One hour, from one engine timer to the next (nothing happens in between).
        for _ in 0..<100_000 where clock.now.offset < .seconds(3_600) {
            await courier.settle()
            let now = clock.now.offset
            let next = min(courier.nextTimerDeadlineForTesting ?? now + step, .seconds(3_600))
            await clock.advance(by: max(next - now, .milliseconds(1)))
        }
        await courier.settle()
        let outage = times.withLock { $0 }
        // I2: one probe at a time, on average no more than one per 30 s, plus the run that tipped it.
        #expect(outage.count <= 120 + 20, "\(outage.count) requests in an hour of outage")
        let gaps = zip(outage, outage.dropFirst()).map { ($1 - $0).seconds }
        #expect(gaps.allSatisfy { $0 <= 60 + step.seconds }, "no probe later than the cap: \(gaps.max() ?? 0) s")
        #expect(gaps.suffix(60).allSatisfy { $0 >= 30 - step.seconds }, "half the cap at least, once it is reached")
        up.value = true
        let recovery = clock.now.offset
        for _ in 0..<240 where courier.pendingCount > 0 {  // two minutes at most
            await clock.advance(by: step)
            await courier.settle()
        }
        #expect(courier.pendingCount == 0)
        let found = times.withLock { $0 }[outage.count] - recovery
        #expect(found <= .seconds(60), "the next probe came \(found) after the destination came back")
        print("an hour of outage, virtual time: \(outage.count) requests, found \(found) after it ended")
        await courier.close()
    }
}

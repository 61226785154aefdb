@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import FlakyServer
import Foundation
import Testing

/// The engine with the adaptive concurrency limit, in virtual time: a busy server is paced,
/// not probed as dead; a refusal for load is retried at the destination's pace, not on the
/// message's backoff; a fixed limit is exactly that; the hand-off keeps to the limit too.
// A hang's bound, not a speed target: alone the suite takes about a second, but beside the
// whole suite on 2 cores its tasks wait their turn (47 s of wall time once, against 1 minute).
@Suite(.timeLimit(.minutes(3))) struct AdaptiveDeliveryTests {
    /// The test server's token bucket (`FlakyServer.TokenBucket`), on the manual clock.
    final class Limiter: @unchecked Sendable {
        let lock = NSLock()
        let clock: ManualClock
        let bucket: FlakyServer.TokenBucket
        var level: FlakyServer.TokenBucket.Level
        var accepted = 0, refused = 0

        init(clock: ManualClock, ratePerSecond: Double, burst: Int) {
            self.clock = clock
            bucket = FlakyServer.TokenBucket(ratePerSecond: ratePerSecond, burst: burst)
            level = FlakyServer.TokenBucket.Level(full: bucket)
        }

        func admit() -> Bool {
            lock.lock(); defer { lock.unlock() }
            let admitted = level.take(bucket, at: clock.now.offset)
            if admitted { accepted += 1 } else { refused += 1 }
            return admitted
        }
    }

    @Test(arguments: [(503, nil), (429, "1")] as [(Int, String?)])
    func aBusyServerIsPacedAtItsRateNotProbedAsDead(status: Int, retryAfter: String?) async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let limiter = Limiter(clock: clock, ratePerSecond: 20, burst: 10)
        let transport = ScriptedTransport { _ in
            limiter.admit() ? .response(status: 200) : .response(status: status, retryAfter: retryAfter)
        }
        let courier = try Courier(
            directory: dir.url,
            configuration: testConfiguration(
                clock: clock, transport: transport,
                jitter: .full))
        let recorder = EventLog(courier.events())
        for i in 0..<500 { try courier.send(["n": i], to: inbox) }
        // From one engine timer to the next (its pace arms one: nothing happens in between), at
        // most 60 virtual seconds. Fixed 10 ms steps cost 6,000 turns a case: 44-50 s of the
        // suite's minute on a loaded 2-core machine.
        for _ in 0..<60_000 where courier.pendingCount > 0 && clock.now.offset < .seconds(60) {
            await courier.settle()
            let now = clock.now.offset
            let next = courier.nextTimerDeadlineForTesting ?? now + .milliseconds(10)
            await clock.advance(by: max(next - now, .milliseconds(1)))
        }
        let elapsed = clock.now.offset
        await courier.close()
        await recorder.finish()
        let summary = "\(elapsed) for 500, \(limiter.accepted + limiter.refused) requests, \(limiter.refused) refused"
        print("limiter \(status) on virtual time: \(summary)")
        #expect(courier.pendingCount == 0, "\(summary)")
        #expect(elapsed <= .seconds(31), "within 1.25 × the limiter's 24.5 s: \(summary)")
        #expect(limiter.refused * 4 < limiter.accepted + limiter.refused, "fewer than 1 in 4 refused: \(summary)")
        #expect(!recorder.events.contains { if case .destinationDown = $0 { true } else { false } }, "\(summary)")
    }

    @Test func aRefusalForLoadIsRetriedAtTheDestinationsPaceNotOnTheMessagesBackoff() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let calls = Counter()
        // Answers 200, except the 11th request: 503, no Retry-After.
        let transport = ScriptedTransport { _ in calls.next() == 11 ? .response(status: 503) : .response(status: 200) }
        let courier = try Courier(
            directory: dir.url,
            configuration: testConfiguration(clock: clock, transport: transport))
        let recorder = EventLog(courier.events())
        for i in 0..<10 { try courier.send(["n": i], to: inbox) }
        await courier.settle()
        let refused = try courier.send(["n": 10], to: inbox)
        await courier.settle()
        // The pace is what the server served over the last second (10/s): one interval.
        await clock.advance(by: .milliseconds(100))
        await courier.settle()
        await courier.close()
        await recorder.finish()
        let next = recorder.events.compactMap { event -> Date?? in
            if case .failed(refused, 1, _, let next) = event { next } else { nil }
        }
        #expect(next == [wallStart], "a busy server's refusal waits for the pace, not for 1 s of backoff")
        #expect(
            recorder.events.contains { if case .delivered(refused, 2) = $0 { true } else { false } },
            "delivered at the next pace slot, 100 ms later")
    }

    @Test func aRetryAfterFromABusyServerHoldsTheMessageAndItsDestination() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let calls = Counter()
        let transport = ScriptedTransport { _ in
            calls.next() == 11 ? .response(status: 429, retryAfter: "3") : .response(status: 200)
        }
        let courier = try Courier(
            directory: dir.url,
            configuration: testConfiguration(clock: clock, transport: transport))
        for i in 0..<10 { try courier.send(["n": i], to: inbox) }
        await courier.settle()
        let refused = try courier.send(["n": 10], to: inbox)
        await courier.settle()
        let other = try courier.send(["n": 11], to: inbox)
        await courier.settle()
        #expect(transport.requests.count == 11, "the destination is held: nothing more goes for 3 s")
        await clock.advance(by: .milliseconds(2_990))
        await courier.settle()
        #expect(transport.requests.count == 11)
        await clock.advance(by: .milliseconds(10))
        await courier.settle()
        #expect(transport.requests.count == 12, "then one, and the next at the pace the server accepted (10/s)")
        await clock.advance(by: .milliseconds(100))
        await courier.settle()
        #expect(courier.pendingCount == 0)
        #expect(Set(transport.requests.suffix(2).map(\.messageID)) == [refused, other])
        await courier.close()
    }

    @Test func aFixedLimitKeepsExactlyThatManyInFlight() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        var config = testConfiguration(clock: clock, transport: transport)
        config.concurrencyLimit = .fixed
        config.maximumConcurrentDeliveries = 4
        let courier = try Courier(directory: dir.url, configuration: config)
        for i in 0..<50 { try courier.send(["n": i], to: inbox) }
        // Every attempt starts in a critical section of the core (each send plans in its own):
        // with no answer yet and no time passing, what has started now is all that will.
        #expect(courier.sendingCount == 4)
        await transport.waitForRequests(4)
        #expect(transport.requests.count == 4)
        transport.holdResponses = false
        transport.release()
        await courier.settle()
        #expect(courier.pendingCount == 0)
        #expect(transport.maximumInFlight == 4)
        await courier.close()
    }

    @Test func anUnknownDestinationStartsAtFourInFlightAndGrowsWhileItAnswers() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let courier = try Courier(
            directory: dir.url,
            configuration: testConfiguration(clock: clock, transport: transport))
        for i in 0..<200 { try courier.send(["n": i], to: inbox) }
        // Every attempt starts in a critical section of the core: what has started is all.
        #expect(courier.sendingCount == 4, "starts low")
        await transport.waitForRequests(4)
        let first = transport.requests.map(\.messageID)
        // The first round trip succeeds: the next round may be up to twice as wide. Once the
        // four deliveries are recorded, so are the plans made with them (same critical section).
        transport.release(4)
        for id in first { try await courier.delivered(id) }
        #expect(courier.sendingCount > 4, "grew on success: \(courier.sendingCount) in flight")
        #expect(courier.sendingCount <= 8, "at most doubled in one round trip: \(courier.sendingCount)")
        transport.holdResponses = false
        transport.release()
        await courier.settle()
        #expect(courier.pendingCount == 0)
        #expect(transport.maximumInFlight <= 64)
        await courier.close()
    }

    /// A destination that has not answered yet gets its first limit's worth (a dead server costs
    /// a handful of requests); once it has answered, the session's bound holds the hand-off,
    /// not the limit learned from the few answers a suspended app hears at each wake.
    @Test func theHandOffKeepsToAnUnansweredDestinationsLimitThenToTheSessionsBound() async throws {
        let server = BackgroundHandOffTests.Server()
        var config = BackgroundHandOffTests.configuration()
        config.concurrencyLimit = .adaptive
        let app = SimulatedApp(server: server.transport, configuration: config)
        app.hearsFirstAnswersBeforeSuspending = false  // suspended at once: the wake brings the answers
        await app.system.launch()
        app.courier?.pause()
        for i in 0..<30 { _ = app.send("m\(i)", to: inbox) }
        await app.enterBackground()
        #expect(app.system.outstandingCount == 4, "not answered yet: the destination's first limit")
        // Bounded: the first wake comes within seconds of the first completion.
        for _ in 0..<60 where app.system.statistics.wakes == 0 { await app.system.advance(by: .seconds(1)) }
        #expect(app.system.statistics.wakes == 1)
        #expect(app.system.outstandingCount == 26, "answered: the rest, within the session's bound of 100")
        await app.system.advance(by: .seconds(600))
        #expect(app.courier?.pendingCount == 0)
        #expect(server.transport.requests.count == 30)
    }

    /// With the lifecycle integration, the app stays up after the blind hand-off until its first
    /// answers come (the seconds iOS grants at `didEnterBackground`): a destination that answers
    /// gets the rest before the app is suspended, with no wake (each wake doubles the system's
    /// rate limiter); one that fails gets one upload at a time until it is known down.
    @Test(arguments: [200, 503])
    func anAppStaysUpForTheFirstAnswersOfABlindHandOff(status: Int) async throws {
        let server = BackgroundHandOffTests.Server { _, _ in .response(status: status) }
        var config = BackgroundHandOffTests.configuration()
        config.concurrencyLimit = .adaptive
        var model = SimulatedBackgroundSystem.Model()
        model.requestDuration = .milliseconds(100)
        let app = SimulatedApp(server: server.transport, configuration: config, model: model)
        await app.system.launch()
        app.courier?.pause()
        for i in 0..<30 { _ = app.send("m\(i)", to: inbox) }
        await app.enterBackground()
        #expect(app.system.appState == .suspended)
        #expect(app.system.statistics.wakes == 0)
        if status == 200 {
            #expect(app.system.statistics.tasksCreated == 30, "answered: the other 26 before the app was suspended")
        } else {
            // The blind four, answered before the app was suspended; then one at a time: the
            // fifth failure makes it down, and one probe waits for its time.
            #expect(server.transport.requests.count == 5)
            #expect(app.system.outstandingCount == 1, "the probe")
        }
    }
}

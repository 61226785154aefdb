@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

@Suite struct EngineTests {
    @Test func sendWritesTheMessageToTheLogBeforeItReturns() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        let id = try courier.send(["text": "hi"], to: inbox)
        var kinds: [RecordKind] = []
        _ = try LogReader(directory: dir.url.path).read { kinds.append($0.kind) }
        #expect(kinds == [.enqueued])
        #expect(courier.pendingCount == 1)
        #expect(id.description == "00000000-0000-0000-0000-000000000001")
        await transport.waitForRequests(1)
        await courier.close()  // cancels the held attempt: not counted, still pending on disk
        var after: [RecordKind] = []
        _ = try LogReader(directory: dir.url.path).read { after.append($0.kind) }
        #expect(after == [.enqueued])
    }

    @Test func eachPostCarriesJSONTheIdempotencyKeyAndTheExactBody() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        let id = try courier.send(["text": "hi", "n": 1], to: inbox, headers: ["X-App": "demo"])
        try await courier.delivered(id)
        let request = try #require(transport.requests.first)
        #expect(request.url == inbox)
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(request.headers["Idempotency-Key"] == id.description)
        #expect(request.headers["X-App"] == "demo")
        #expect(String(decoding: request.body, as: UTF8.self) == #"{"n":1,"text":"hi"}"#)
        #expect(request.timeout == .seconds(30))
        await courier.close()
    }

    @Test func nothingIsSentBeforeItsDueTimeAndEverythingDueIsSent() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt < 3 ? .response(status: 500) : .response(status: 200) }
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: clock, transport: transport))
        let id = try courier.send(["text": "hi"], to: inbox)
        await courier.settle()
        #expect(transport.requests.count == 1)
        await clock.advance(by: .milliseconds(999))  // attempt 2 is due 1 s after attempt 1 (no jitter)
        await courier.settle()
        #expect(transport.requests.count == 1)
        await clock.advance(by: .milliseconds(1))
        await courier.settle()
        #expect(transport.requests.count == 2)
        await clock.advance(by: .milliseconds(1999))  // attempt 3: 2 s later
        await courier.settle()
        #expect(transport.requests.count == 2)
        await clock.advance(by: .milliseconds(1))
        try await courier.delivered(id)
        #expect(transport.requests.map(\.attempt) == [1, 2, 3])
        #expect(courier.pendingCount == 0)
        await courier.close()
    }

    @Test func theConcurrencyLimitIsHeld() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.maximumConcurrentDeliveries = 3
        let courier = try Courier(directory: dir.url, configuration: config)
        for i in 0..<10 { try courier.send(["n": i], to: inbox) }
        #expect(courier.inFlightCount == 3)
        await transport.waitForRequests(3)
        #expect(transport.heldCount == 3)
        // Release one at a time: each completion starts exactly one more.
        for done in 1...7 {
            transport.release(1)
            await transport.waitForRequests(3 + done)
            #expect(courier.inFlightCount <= 3)
        }
        transport.holdResponses = false
        transport.release()
        await courier.waitUntilIdle()
        #expect(transport.requests.count == 10)
        #expect(transport.maximumInFlight == 3)
        await courier.close()
    }

    @Test func aStormOf500sDelaysOnlyTheFailingMessages() async throws {
        let dir = TemporaryDirectory()
        let failing = URL(string: "https://down.example/x")!
        let transport = ScriptedTransport { $0.url == failing ? .response(status: 500) : .response(status: 200) }
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.maximumConcurrentDeliveries = 2
        let courier = try Courier(directory: dir.url, configuration: config)
        for i in 0..<5 { try courier.send(["bad": i], to: failing) }
        let good = try (0..<20).map { try courier.send(["good": $0], to: inbox) }
        for id in good { try await courier.delivered(id) }  // no clock advance needed
        #expect(courier.pendingCount == 5)
        await courier.close()
    }

    @Test func retryAfterOn429IsHonoured() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport {
            $0.attempt == 1 ? .response(status: 429, retryAfter: "120") : .response(status: 200)
        }
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: clock, transport: transport))
        let id = try courier.send(["text": "hi"], to: inbox)
        await courier.settle()
        await clock.advance(by: .seconds(119))
        await courier.settle()
        #expect(transport.requests.count == 1)
        await clock.advance(by: .seconds(1))
        try await courier.delivered(id)
        await courier.close()
    }

    /// Durations no clock reaches ("never", spelled as the largest value) are settings a courier
    /// accepts, and a server may send any `Retry-After`: none of them may trap.
    @Test func hugeDurationsAndAHugeRetryAfterNeverTrap() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let forever = Duration.seconds(Int64.max)
        let transport = ScriptedTransport {
            switch $0.attempt {
            case 1: .response(status: 429, retryAfter: "9000000000000000000")
            case 2: .response(status: 503, retryAfter: "120")
            default: .response(status: 200)
            }
        }
        var configuration = testConfiguration(clock: clock, transport: transport)
        configuration.retry = RetryPolicy(
            initialDelay: .seconds(1), maximumDelay: forever, expiry: forever, retryAfterLimit: .seconds(60))
        configuration.retry.explainedFailures.windowDuration = forever
        configuration.destinationBackoff.maximumProbeDelay = forever
        configuration.durability = .interval(forever)
        configuration.requestTimeout = forever
        #expect(configuration.problems.isEmpty)
        let courier = try Courier(directory: dir.url, configuration: configuration)
        let id = try courier.send(["text": "hi"], to: inbox)
        await courier.settle()
        await clock.advance(by: .seconds(60))  // the header asked for ages: clamped to the limit
        await courier.settle()
        #expect(transport.requests.count == 2)
        await clock.advance(by: .seconds(60))
        try await courier.delivered(id)
        await courier.close()

        // With no limit on `Retry-After` either, the message waits as asked: parked, not a trap.
        configuration.retry.retryAfterLimit = forever
        let second = TemporaryDirectory()
        let reopened = try Courier(directory: second.url, configuration: configuration)
        let parked = try reopened.send(["text": "later"], to: inbox)
        await reopened.settle()
        await clock.advance(by: .seconds(3600))
        await reopened.settle()
        #expect(reopened.pendingCount == 1 && transport.requests.last?.messageID == parked)
        await reopened.close()

        // A retry budget that refills at nearly nothing: the next token is ages away, not a trap.
        let failing = ScriptedTransport { _ in .response(status: 500) }
        var starved = testConfiguration(clock: clock, transport: failing)
        starved.retry = RetryPolicy(jitter: .none)
        starved.retryBudget = RetryBudget(capacity: 1, tokensPerSuccess: 1, tokensPerSecond: 1e-300)
        let third = TemporaryDirectory()
        let budgeted = try Courier(directory: third.url, configuration: starved)
        try budgeted.send(["text": "soon"], to: inbox)
        for _ in 0..<4 {
            await budgeted.settle()
            await clock.advance(by: .seconds(10))
        }
        #expect(failing.requests.count == 2, "the first attempt, then the one retry its token paid for")
        await budgeted.close()
        let answer = await withDeadline(forever, clock: clock) { (.response(status: 204), nil) }.0
        #expect(answer == .response(status: 204), "a deadline of \"never\" waits, and traps nowhere")
    }

    @Test func callbacksFireOnceAndEventsTellTheStory() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt == 1 ? .response(status: 500) : .response(status: 200) }
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: clock, transport: transport))
        let events = EventLog(courier.events())
        let calls = Counter()
        let id = try courier.send(["text": "hi"], to: inbox, onDelivered: { _ in calls.increment() })
        await courier.settle()
        await clock.advance(by: .seconds(1))
        try await courier.delivered(id)
        try await courier.delivered(id)  // already delivered: returns at once
        await courier.close()
        await events.finish()
        #expect(calls.value == 1)
        #expect(events.events == [
            .enqueued(id), .attemptStarted(id, number: 1),
            .failed(id, attempt: 1, outcome: .response(status: 500), nextAttemptAt: wallStart.addingTimeInterval(1)),
            .attemptStarted(id, number: 2), .delivered(id, attempts: 2),
        ])
    }

    @Test func anAbandonedMessageIsReportedWithItsReasonAndLogged() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport { _ in .response(status: 404) }
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.retry.classifier = .giveUpOnClientErrors
        let courier = try Courier(directory: dir.url, configuration: config)
        let events = EventLog(courier.events())
        let abandoned = Counter()
        let id = try courier.send(["text": "hi"], to: inbox, onAbandoned: { _, error in
            #expect(error.code == .abandoned)
            abandoned.increment()
        })
        await #expect { try await courier.delivered(id) } throws: { ($0 as? CourierError)?.code == .abandoned }
        await courier.close()
        await events.finish()
        #expect(abandoned.value == 1)
        #expect(events.events.contains(.abandoned(id, attempts: 1, reason: .clientError(status: 404))))
        var kinds: [RecordKind] = []
        _ = try LogReader(directory: dir.url.path).read { kinds.append($0.kind) }
        #expect(kinds == [.enqueued, .abandoned])
        // The log keeps the reason as its text: a later run's waiter is told it in words.
        let reopened = try Courier(directory: dir.url, configuration: config)
        await #expect { try await reopened.delivered(id) } throws: {
            ($0 as? CourierError) == CourierError(.abandoned, AbandonReason.clientError(status: 404).description)
        }
        await reopened.close()
    }

    @Test func fifoPerDestinationHoldsLaterMessagesBehindAFailingOne() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport {
            $0.attempt == 1 && String(decoding: $0.body, as: UTF8.self).contains("first")
                ? .response(status: 500) : .response(status: 200)
        }
        var config = testConfiguration(clock: clock, transport: transport)
        config.deliveryOrder = .fifoPerDestination
        let courier = try Courier(directory: dir.url, configuration: config)
        let first = try courier.send(["m": "first"], to: inbox)
        let second = try courier.send(["m": "second"], to: inbox)
        await courier.settle()
        #expect(transport.requests.count == 1, "second waits while first is retried")
        await clock.advance(by: .seconds(1))
        try await courier.delivered(first)
        try await courier.delivered(second)
        #expect(transport.requests.map { String(decoding: $0.body, as: UTF8.self) }
                == [#"{"m":"first"}"#, #"{"m":"first"}"#, #"{"m":"second"}"#])
        await courier.close()
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func increment() { lock.withLock { n += 1 } }
    var value: Int { lock.withLock { n } }
    /// Counts one more and returns the count (1 for the first call).
    func next() -> Int { lock.withLock { n += 1; return n } }
}

@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// pause / resume / retryNow / deliverPending, on a manual clock (issue 8).
@Suite(.timeLimit(.minutes(5))) struct ControlTests {
    @Test func nothingIsSentWhilePausedAndEverythingAfterResume() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport()
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url,
                                  configuration: testConfiguration(clock: clock, transport: transport))
        courier.pause()
        let ids = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(3600))
        await courier.settle()
        #expect(transport.requests.isEmpty)
        courier.resume()
        for id in ids { try await courier.delivered(id) }
        #expect(transport.requests.count == 3)
        await courier.close()
    }

    @Test func anAttemptInFlightWhenPausedFinishesAndIsLogged() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        let id = try courier.send(["n": 1], to: inbox)
        await transport.waitForRequests(1)
        courier.pause()
        transport.release()
        try await courier.delivered(id)
        await courier.close()
        var kinds: [RecordKind] = []
        _ = try LogReader(directory: dir.url.path).read { kinds.append($0.kind) }
        #expect(kinds == [.enqueued, .delivered])
    }

    /// A message waiting out an hour's backoff goes at once; its attempt count is kept.
    @Test func retryNowSendsAMessageThatWasWaitingAnHour() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt == 1 ? .response(status: 503) : .response(status: 200) }
        var config = testConfiguration(clock: clock, transport: transport)
        config.retry = RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600), jitter: .none)
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url, configuration: config)
        let id = try courier.send(["n": 1], to: inbox)
        await transport.waitForRequests(1)
        await courier.settle()
        #expect(courier.pendingCount == 1)
        await clock.advance(by: .seconds(60))
        await courier.settle()
        #expect(transport.requests.count == 1, "still waiting its hour")
        courier.retryNow()
        try await courier.delivered(id)
        #expect(transport.requests.map(\.attempt) == [1, 2])
        await courier.close()
    }

    @Test func deliverPendingDeliversWhatItCanAndCounts() async throws {
        let transport = ScriptedTransport()
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        courier.pause()
        for i in 0..<5 { try courier.send(["n": i], to: inbox) }
        let summary = await courier.deliverPending(within: .seconds(25))
        #expect(summary == .init(delivered: 5, remaining: 0))
        await courier.close()
    }

    /// The budget ends the call: the attempt in flight is cancelled, not logged, the message
    /// stays pending, and the log is synced.
    @Test func deliverPendingStopsCleanlyWhenItsBudgetIsSpent() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        var config = testConfiguration(clock: clock, transport: transport)
        config.durability = .interval(.seconds(3600))  // only an explicit sync makes it durable
        let courier = try Courier(directory: dir.url, configuration: config)
        courier.pause()
        try courier.send(["n": 1], to: inbox)
        let run = Task { await courier.deliverPending(within: .seconds(25)) }
        await transport.waitForRequests(1)
        await clock.advance(by: .seconds(25))
        let summary = await run.value
        #expect(summary == .init(delivered: 0, remaining: 1))
        #expect(courier.log.durableSequence == courier.log.nextSequence - 1, "synced")
        #expect(transport.heldCount == 0, "nothing left in flight")
        await courier.settle()
        #expect(transport.requests.count == 1, "still paused afterwards: no new attempt")
        await courier.close()
        var kinds: [RecordKind] = []
        _ = try LogReader(directory: dir.url.path).read { kinds.append($0.kind) }
        #expect(kinds == [.enqueued], "a cancelled attempt leaves no record")
    }

    /// Cancelling the calling task (a background task's expiration) ends it at once.
    @Test(.timeLimit(.minutes(1)))
    func deliverPendingReturnsWhenItsTaskIsCancelled() async throws {
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        try courier.send(["n": 1], to: inbox)
        let run = Task { await courier.deliverPending(within: .seconds(3600)) }
        await transport.waitForRequests(1)
        run.cancel()
        let summary = await run.value
        #expect(summary.remaining == 1 && summary.delivered == 0)
        await courier.close()
    }
}

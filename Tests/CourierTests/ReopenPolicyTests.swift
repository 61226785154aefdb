@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// Opening holds waiting messages to the current retry policy: an app that lowers its delays in
/// an update does not go on waiting for what the old policy scheduled. A due time from backoff
/// goes no further than `maximumDelay` from now; one from a server's `Retry-After`, no further
/// than `retryAfterLimit`.
@Suite struct ReopenPolicyTests {
    /// Sends one message, lets its first attempt end with `outcome` under `policy`, closes.
    func oneFailedAttempt(in directory: URL, policy: RetryPolicy, outcome: DeliveryOutcome) async throws {
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport { _ in outcome })
        configuration.retry = policy
        let courier = try Courier(directory: directory, configuration: configuration)
        try courier.send(["text": "hi"], to: inbox)
        await courier.settle()
        #expect(courier.pendingCount == 1)
        await courier.close()
    }

    /// How long after the wall time of opening the one pending message is due, reopened with
    /// `policy` (nothing is delivered: the clock never moves).
    func secondsUntilDue(in directory: URL, policy: RetryPolicy) async throws -> Double {
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        configuration.retry = policy
        let courier = try Courier(directory: directory, configuration: configuration)
        courier.pause()
        let pending = await courier.pendingMessages()
        await courier.close()
        try #require(pending.count == 1)
        // Due times are whole milliseconds: round away the Date's floating-point residue.
        return (pending[0].nextAttemptAt.timeIntervalSince(wallStart) * 1000).rounded() / 1000
    }

    @Test func aBackoffWaitIsCutToTheNewMaximumDelay() async throws {
        let temporary = TemporaryDirectory()
        let directory = temporary.url
        let hourly = RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600), jitter: .none)
        try await oneFailedAttempt(in: directory, policy: hourly, outcome: .response(status: 500))
        #expect(try await secondsUntilDue(in: directory, policy: hourly) == 3600, "the same policy keeps the wait")
        let quick = RetryPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(80), jitter: .none)
        #expect(try await secondsUntilDue(in: directory, policy: quick) == 0.08)
    }

    @Test func aRetryAfterWaitIsKeptUpToRetryAfterLimitNotMaximumDelay() async throws {
        let temporary = TemporaryDirectory()
        let directory = temporary.url
        let quick = RetryPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(80), jitter: .none)
        try await oneFailedAttempt(in: directory, policy: quick, outcome: .response(status: 429, retryAfter: "600"))
        #expect(try await secondsUntilDue(in: directory, policy: quick) == 600,
                "the server asked for 600 s, within the 1 h limit")
        var stricter = quick
        stricter.retryAfterLimit = .seconds(120)
        #expect(try await secondsUntilDue(in: directory, policy: stricter) == 120)
    }

    @Test func aRetryAfterOnAnotherStatusIsBackoff() async throws {
        let temporary = TemporaryDirectory()
        let directory = temporary.url
        let hourly = RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600), jitter: .none)
        // The policy honours Retry-After on 429 and 503 only: this wait is backoff's.
        try await oneFailedAttempt(in: directory, policy: hourly, outcome: .response(status: 500, retryAfter: "7200"))
        let quick = RetryPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(80), jitter: .none)
        #expect(try await secondsUntilDue(in: directory, policy: quick) == 0.08)
    }

    /// A message waiting out a server's `Retry-After` is still scheduled: reopened with a
    /// shorter limit it goes when that limit is up, and `retryNow()` sends it at once.
    @Test func aMessageWaitingOutRetryAfterStillGoes() async throws {
        let temporary = TemporaryDirectory()
        let quick = RetryPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(80), jitter: .none)
        try await oneFailedAttempt(in: temporary.url, policy: quick, outcome: .response(status: 503, retryAfter: "600"))
        var stricter = quick
        stricter.retryAfterLimit = .seconds(120)
        let clock = ManualClock()
        let transport = ScriptedTransport()
        var configuration = testConfiguration(clock: clock, transport: transport)
        configuration.retry = stricter
        let reopened = try Courier(directory: temporary.url, configuration: configuration)
        await reopened.settle()
        #expect(transport.requests.isEmpty, "not before the limit")
        await clock.advance(by: .seconds(120))
        await reopened.settle()
        #expect(transport.requests.count == 1)
        #expect(reopened.pendingCount == 0)
        await reopened.close()

        let again = TemporaryDirectory()
        try await oneFailedAttempt(in: again.url, policy: quick, outcome: .response(status: 429, retryAfter: "600"))
        let now = ScriptedTransport()
        let courier = try Courier(directory: again.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: now))
        await courier.settle()
        #expect(now.requests.isEmpty)
        courier.retryNow()
        await courier.settle()
        #expect(now.requests.count == 1, "retryNow sends a message waiting out Retry-After")
        await courier.close()
    }
}

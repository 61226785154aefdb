@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// `send(…expiry:)`: a message worth sending only for a while is abandoned once it fails past
/// its expiry, across restarts (it is stored with the message); the sooner of it and
/// `RetryPolicy.expiry` applies.
@Suite(.timeLimit(.minutes(1))) struct ExpiryTests {
    /// Attempts at 0, 1, 3 and 7 s (1 s × 2ⁿ⁻¹, no jitter) against a server that always fails.
    func run(
        expiry: Duration?, policyExpiry: Duration? = nil, reopen: Bool = false
    ) async throws -> (attempts: Int, reason: AbandonReason?) {
        let temporary = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport { _ in .response(status: 500) }
        var configuration = testConfiguration(clock: clock, transport: transport)
        configuration.retry.expiry = policyExpiry
        var courier = try Courier(directory: temporary.url, configuration: configuration)
        if reopen { courier.pause() }
        let id = try courier.send(["at": 1], to: inbox, expiry: expiry)
        if reopen {
            await courier.close()
            courier = try Courier(directory: temporary.url, configuration: configuration)
        }
        let events = EventLog(courier.events())
        // Bounded: 20 virtual seconds, a second at a time.
        for _ in 0..<20 {
            await courier.settle()
            await clock.advance(by: .seconds(1))
        }
        await courier.close()
        await events.finish()
        let reason = events.events.lazy.compactMap { e -> AbandonReason? in
            if case .abandoned(id, _, let reason) = e { reason } else { nil }
        }.first
        return (transport.requests.count, reason)
    }

    @Test func aMessageIsAbandonedOnceItFailsPastItsExpiry() async throws {
        let (attempts, reason) = try await run(expiry: .seconds(10))
        #expect(attempts == 4, "at 0, 1, 3 and 7 s: the next, at 15 s, is past 10 s")
        #expect(reason == .expired(expiry: .seconds(10), lastOutcome: .response(status: 500)))
        let (forever, none) = try await run(expiry: nil)
        #expect(forever >= 5 && none == nil, "without one it is retried past 10 s (at 15 s)")
    }

    @Test func theExpiryIsStoredWithTheMessage() async throws {
        let (attempts, reason) = try await run(expiry: .seconds(10), reopen: true)
        #expect(attempts == 4 && reason == .expired(expiry: .seconds(10), lastOutcome: .response(status: 500)))
    }

    @Test func theSoonerOfItAndThePolicysApplies() async throws {
        let (attempts, reason) = try await run(expiry: .seconds(60), policyExpiry: .seconds(2))
        #expect(attempts == 2 && reason == .expired(expiry: .seconds(2), lastOutcome: .response(status: 500)))
    }
}

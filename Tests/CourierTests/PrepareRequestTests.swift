@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// `Configuration.prepareRequest`: fresh credentials on every attempt, never on disk.
@Suite struct PrepareRequestTests {
    /// A token service that hands out token-1, token-2, … and a server that accepts only the
    /// third: the first two attempts get 401 and are retried (even by a policy that gives up
    /// on other client errors), each with a fresh token.
    @Test func everyAttemptCarriesAFreshTokenAndA401IsRetried() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let issued = Counter()
        let transport = ScriptedTransport {
            $0.headers["Authorization"] == "Bearer token-3" ? .response(status: 200) : .response(status: 401)
        }
        var config = testConfiguration(clock: clock, transport: transport)
        config.retry.classifier = .giveUpOnClientErrors
        config.prepareRequest = { request in
            issued.increment()
            request.headers["Authorization"] = "Bearer token-\(issued.value)"
        }
        let courier = try Courier(directory: dir.url, configuration: config)
        let id = try courier.send(["text": "hi"], to: inbox)
        await courier.settle()
        await clock.advance(by: .seconds(1))
        await courier.settle()
        await clock.advance(by: .seconds(2))
        try await courier.delivered(id)
        #expect(transport.requests.map { $0.headers["Authorization"] }
                == ["Bearer token-1", "Bearer token-2", "Bearer token-3"])
        await courier.close()
        var bodies: [[UInt8]] = []
        _ = try LogReader(directory: dir.url.path).read { bodies.append(Array($0.body)) }
        #expect(bodies.count == 4, "enqueued, two attempts, delivered")
        #expect(!bodies.contains { String(decoding: $0, as: UTF8.self).contains("token") })
    }

    /// A throw sends nothing and is a failed attempt, retried under the policy; the event and
    /// the log name the error's type, never its contents (it may hold a secret).
    @Test func aThrowingPrepareRequestIsAFailedAttemptRetriedUnderThePolicy() async throws {
        struct TokenServiceDown: Error { var detail = "refresh-token-XYZ" }
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let calls = Counter()
        let transport = ScriptedTransport()
        var config = testConfiguration(clock: clock, transport: transport)
        config.prepareRequest = { _ in
            calls.increment()
            if calls.value == 1 { throw TokenServiceDown() }
        }
        let courier = try Courier(directory: dir.url, configuration: config)
        let log = EventLog(courier.events())
        let id = try courier.send(["text": "hi"], to: inbox)
        await courier.settle()
        #expect(transport.requests.isEmpty, "nothing was sent")
        await clock.advance(by: .seconds(1))
        try await courier.delivered(id)
        #expect(transport.requests.map(\.attempt) == [2])
        await courier.close()
        await log.finish()
        let failure = log.events.compactMap { event -> TransportFailure? in
            if case .failed(_, 1, .failure(let f), _) = event { f } else { nil }
        }.first
        #expect(failure?.kind == .requestPreparation)
        #expect(failure.map { $0.message.contains("TokenServiceDown") && !$0.message.contains("XYZ") } == true)
        var bodies: [[UInt8]] = []
        _ = try LogReader(directory: dir.url.path).read { bodies.append(Array($0.body)) }
        #expect(!bodies.contains { String(decoding: $0, as: UTF8.self).contains("XYZ") })
    }

    @Test func theClassifierTellsA401ApartFromOtherClientErrors() {
        var random = SystemRandomNumberGenerator()
        var policy = RetryPolicy(classifier: .giveUpOnClientErrors)
        let now = Date()
        #expect(DeliveryOutcome.response(status: 401).isUnauthorized)
        #expect(!DeliveryOutcome.response(status: 403).isUnauthorized)
        guard case .retry = policy.decide(.response(status: 401), attempt: 1, sinceSend: .zero, now: now,
                                          using: &random)
        else {
            Issue.record("401 is retried by default")
            return
        }
        guard case .giveUp = policy.decide(.response(status: 403), attempt: 1, sinceSend: .zero, now: now,
                                          using: &random)
        else {
            Issue.record("403 gives up")
            return
        }
        policy.retriesUnauthorized = false
        guard case .giveUp = policy.decide(.response(status: 401), attempt: 1, sinceSend: .zero, now: now,
                                          using: &random)
        else {
            Issue.record("401 gives up when told to")
            return
        }
    }
}

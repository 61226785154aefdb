#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
#endif
@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import FlakyServer
import Foundation
import Testing

/// One policy on every transport: `requestTimeout` is a whole-request deadline, and redirects
/// are never followed.
@Suite struct TransportPolicyTests {
    func transports(clock: ManualClock) -> [(String, any DeliveryTransport)] {
        var all: [(String, any DeliveryTransport)] = [("URLSession", URLSessionTransport(clock: clock))]
        #if canImport(AsyncHTTPClient)
        all.append(("AsyncHTTPClient", AsyncHTTPClientTransport(clock: clock)))
        #endif
        return all
    }

    func request(_ url: URL, timeout: Duration) -> DeliveryRequest {
        DeliveryRequest(url: url, headers: ["Content-Type": "application/json", "Idempotency-Key": UUID().uuidString],
                        body: Data("{}".utf8), timeout: timeout, messageID: MessageID(), attempt: 1)
    }

    /// The deadline runs on the injected clock: advancing it past the timeout ends a request
    /// the server is still holding (an idle timeout would wait in real time, 60 s here).
    @Test(.timeLimit(.minutes(1)))
    func theDeadlineCoversTheWholeRequestOnEveryTransport() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0, delay: .seconds(20)))
        let url = await server.url
        let clock = ManualClock()
        for (name, transport) in transports(clock: clock) {
            let sleepers = clock.sleeperCount
            let attempt = Task { await transport.deliver(request(url, timeout: .seconds(60))) }
            // Wait (bounded) until the deadline's sleeper is registered, then pass it.
            for _ in 0..<2_000 where clock.sleeperCount == sleepers { try await Task.sleep(for: .milliseconds(1)) }
            await clock.advance(by: .seconds(61))
            let outcome = await attempt.value
            guard case .failure(let f) = outcome else { Issue.record("\(name): \(outcome)"); continue }
            #expect(f.kind == .timeout, "\(name): \(f)")
            await transport.shutdown()
        }
        await server.stop()
    }

    #if canImport(AsyncHTTPClient)
    /// With the default clock, AsyncHTTPClient keeps the deadline on its event loop (no timer
    /// task beside the request): a server that holds the request past it still times out.
    @Test(.timeLimit(.minutes(1)))
    func theDefaultClocksDeadlineEndsARequestTheServerHolds() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0, delay: .seconds(5)))
        let transport = AsyncHTTPClientTransport()
        let started = ContinuousClock.now
        let outcome = await transport.deliver(request(await server.url, timeout: .milliseconds(300)))
        let elapsed = ContinuousClock.now - started
        guard case .failure(let f) = outcome else { Issue.record("\(outcome)"); return }
        #expect(f.kind == .timeout, "\(f)")
        #expect(elapsed < .seconds(4), "ended at the deadline, not when the server answered")
        await transport.shutdown()
        await server.stop()
    }

    /// Requests to one destination, each made from a bare POST: each carries its own headers
    /// and body only, nothing of the requests before it.
    @Test(.timeLimit(.minutes(1)))
    func eachRequestCarriesOnlyItsOwnHeadersAndBody() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0))
        let transport = AsyncHTTPClientTransport()
        let url = await server.url
        let other = url.appendingPathComponent("other")
        var sent: [String: Data] = [:]
        for n in 0..<6 {
            let key = UUID().uuidString, body = Data(#"{"n":\#(n)}"#.utf8)
            let headers = ["Content-Type": "application/json", "Idempotency-Key": key]
            let outcome = await transport.deliver(
                DeliveryRequest(
                    url: n % 3 == 2 ? other : url, headers: headers, body: body, timeout: .seconds(10),
                    messageID: MessageID(), attempt: 1))
            #expect(outcome == .response(status: 200, retryAfter: nil), "request \(n): \(outcome)")
            sent[key] = body
        }
        #expect(server.statistics.distinctKeys == 6, "one key per request: none carried an earlier one's")
        #expect(server.acceptedBodies == sent)
        // The loopback server keeps one value per header name, so it would not see a header
        // repeated from an earlier request: the templates themselves must stay bare.
        for destination in [url, other] {
            let template = try transport.template(for: destination)
            #expect(template.headers.isEmpty && template.body == nil, "\(destination): \(template.headers)")
        }
        await transport.shutdown()
        await server.stop()
    }

    /// Cancelling the attempt's task (`close()`, the end of `deliverPending`) cancels the
    /// request: the outcome is `.cancelled`, not a failure of the destination.
    @Test(.timeLimit(.minutes(1)))
    func cancellingTheTaskCancelsTheRequest() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0, delay: .seconds(5)))
        let transport = AsyncHTTPClientTransport()
        let url = await server.url
        let attempt = Task { await transport.deliver(request(url, timeout: .seconds(30))) }
        // The request reaches the server (which holds it 5 s) before the task is cancelled.
        // Bounded: at most 1,000 turns of 5 ms.
        for _ in 0..<1_000 where server.statistics.requests == 0 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(server.statistics.requests == 1, "the request reached the server")
        attempt.cancel()
        let outcome = await attempt.value
        guard case .failure(let f) = outcome else { Issue.record("\(outcome)"); return }
        #expect(f.kind == .cancelled, "\(f)")
        await transport.shutdown()
        await server.stop()
    }
    #endif

    @Test func anOperationThatEndsFirstIsNotTimedOut() async {
        let clock = ManualClock()
        let outcome = await withDeadline(.seconds(1), clock: clock) { (.response(status: 204, retryAfter: nil), nil) }.0
        #expect(outcome == .response(status: 204, retryAfter: nil))
        #expect(clock.sleeperCount == 0, "the deadline's sleeper was cancelled")
    }

    @Test(.timeLimit(.minutes(1)))
    func redirectsAreReportedNotFollowed() async throws {
        let server = try await FlakyServer(behavior: .init(failureRate: 0))
        let base = await server.url
        let redirect = URL(string: "/redirect", relativeTo: base)!.absoluteURL
        for (name, transport) in transports(clock: ManualClock()) {
            let outcome = await transport.deliver(request(redirect, timeout: .seconds(10)))
            #expect(outcome.status == 307, "\(name): \(outcome)")
            await transport.shutdown()
        }
        #expect(server.statistics.requests == 0, "no POST reached /messages")
        await server.stop()
    }
}

extension DeliveryOutcome {
    var status: Int? { if case .response(let s, _) = self { s } else { nil } }
}

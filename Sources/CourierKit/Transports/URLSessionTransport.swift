import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// POSTs through `URLSession`. The default on Apple platforms; selectable on Linux, where it
/// is not the default (it misbehaves when servers drop connections: see the DocC article "Running on Linux").
///
/// Policies shared with `AsyncHTTPClientTransport`: `request.timeout` is a deadline for the
/// whole request (not URLSession's idle `timeoutInterval`), and redirects are never followed:
/// a 3xx is reported as it is, and the retry policy retries it like a 5xx.
public final class URLSessionTransport: DeliveryTransport {
    private let session: URLSession
    private let clock: any Clock<Duration>

    /// A transport with its own session, made from `configuration`.
    /// - Parameters:
    ///   - configuration: the default is an ephemeral configuration (no cookies, no cache:
    ///     each POST stands alone).
    ///   - clock: what the whole-request deadline is measured on. The default is
    ///     `ContinuousClock()`; tests pass a manual clock.
    public init(configuration: URLSessionConfiguration = .ephemeral, clock: any Clock<Duration> = ContinuousClock()) {
        session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
        self.clock = clock
    }

    /// POSTs `request` within `request.timeout`; every failure becomes a classified outcome.
    public func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome { await exchange(request).0 }

    /// `deliver(_:)`, with the server's answer (`ServerAnswer`).
    public func exchange(_ request: DeliveryRequest) async -> (DeliveryOutcome, ServerAnswer?) {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = "POST"
        urlRequest.httpBody = request.body
        // The idle timeout, as a backstop; the deadline below is the real limit. At most 2^31 s:
        // Foundation on Linux multiplies it into an Int, and "never" would trap there.
        urlRequest.timeoutInterval = min(request.timeout.seconds, 0x1p31)
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        return await withDeadline(request.timeout, clock: clock) { [session, urlRequest] in
            // The response, or the error, becomes an outcome as a background upload's does.
            var http: HTTPURLResponse?, body = Data(), failure: (any Error)?
            do {
                let (data, response) = try await session.data(for: urlRequest)
                (body, http) = (data, response as? HTTPURLResponse)
            } catch {
                failure = error
            }
            let outcome = BackgroundUploadCompletion.outcome(
                statusCode: http?.statusCode, retryAfter: http?.value(forHTTPHeaderField: "Retry-After"),
                error: failure)
            guard let http, case .response = outcome else { return (outcome, nil) }
            var headers: [String: String] = [:]
            for case let (name as String, value as String) in http.allHeaderFields { headers[name] = value }
            return (outcome, ServerAnswer(status: http.statusCode, headers: headers, body: body))
        }
    }

    public func shutdown() async { session.finishTasksAndInvalidate() }

    // A session keeps its delegate until invalidated: without this, a transport released
    // without `shutdown()` would leak its session.
    deinit { session.finishTasksAndInvalidate() }

    /// The session configuration the default transport uses: ephemeral (no cookies, no cache),
    /// as many connections per host as `maximumConcurrentDeliveries`, with `configuration`'s
    /// network-access policy. (swift-corelibs-foundation has only
    /// `allowsCellularAccess`; the other two exist on Apple platforms only.)
    static func sessionConfiguration(for configuration: Courier.Configuration) -> URLSessionConfiguration {
        let session = URLSessionConfiguration.ephemeral
        session.allowsCellularAccess = configuration.allowsCellularAccess
        // HTTP/1.1 connections per host (the default is 6 on iOS): as many as Courier may have
        // in flight, so none queues inside the session, hidden from the concurrency limit.
        // HTTP/2 multiplexes every request over one connection whatever this says.
        session.httpMaximumConnectionsPerHost = configuration.maximumConcurrentDeliveries
        #if canImport(Darwin)
        session.allowsExpensiveNetworkAccess = configuration.allowsExpensiveNetworkAccess
        session.allowsConstrainedNetworkAccess = configuration.allowsConstrainedNetworkAccess
        #endif
        return session
    }

    static func classify(_ error: any Error) -> TransportFailure {
        if error is CancellationError { return TransportFailure(.cancelled, "cancelled") }
        guard let e = error as? URLError else { return TransportFailure(.other, "\(error)") }
        let kind: TransportFailure.Kind
        switch e.code {
        case .timedOut: kind = .timeout
        case .networkConnectionLost: kind = .connectionClosed
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet: kind = .connectionFailed
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected:
            kind = .tls
        case .cancelled: kind = .cancelled
        default: kind = .other
        }
        return TransportFailure(kind, "URLError \(e.code.rawValue): \(e.localizedDescription)")
    }
}

/// `URLSession` is thread-safe and the references never change; the clock is only read.
extension URLSessionTransport: @unchecked Sendable {}

/// Refuses every redirect: URLSession then hands the 3xx response itself to the caller
/// (`urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)` called with
/// nil). A POST redirected elsewhere should be the app's explicit decision, not a default.
final class RedirectRefusal: NSObject, URLSessionTaskDelegate {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// Stateless.
extension RedirectRefusal: @unchecked Sendable {}

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// POSTs through `URLSession`. The default on Apple platforms; selectable on Linux, where it
/// is not the default (it misbehaves when servers drop connections: see README).
public final class URLSessionTransport: DeliveryTransport {
    private let session: URLSession

    /// - Parameter configuration: the default is an ephemeral configuration (no cookies, no
    ///   cache: each POST stands alone).
    public init(configuration: URLSessionConfiguration = .ephemeral) {
        session = URLSession(configuration: configuration)
    }

    public func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = "POST"
        urlRequest.httpBody = request.body
        urlRequest.timeoutInterval = request.timeout.seconds
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        do {
            let (_, response) = try await session.data(for: urlRequest)
            guard let http = response as? HTTPURLResponse else {
                return .failure(TransportFailure(.other, "not an HTTP response"))
            }
            return .response(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        } catch {
            return .failure(Self.classify(error))
        }
    }

    public func shutdown() async { session.finishTasksAndInvalidate() }

    static func classify(_ error: any Error) -> TransportFailure {
        if error is CancellationError { return TransportFailure(.cancelled, "cancelled") }
        guard let e = error as? URLError else { return TransportFailure(.other, "\(error)") }
        let kind: TransportFailure.Kind
        switch e.code {
        case .timedOut: kind = .timeout
        case .networkConnectionLost: kind = .connectionClosed
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet: kind = .connectionFailed
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected: kind = .tls
        case .cancelled: kind = .cancelled
        default: kind = .other
        }
        return TransportFailure(kind, "URLError \(e.code.rawValue): \(e.localizedDescription)")
    }
}

/// `URLSession` is thread-safe; the reference never changes.
extension URLSessionTransport: @unchecked Sendable {}

#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// POSTs through AsyncHTTPClient: the default on Linux. Measured here against a loopback
/// server that drops 5% of connections, it reports each drop at once and never re-sends a POST
/// on its own, where URLSession on Linux hung until its timeout and re-sent POSTs unasked.
public final class AsyncHTTPClientTransport: DeliveryTransport {
    private let client: HTTPClient
    private let ownsClient: Bool

    /// Uses its own client, shut down by `shutdown()`. Redirects are not followed: a POST
    /// redirected elsewhere should be an explicit decision, and 3xx is retried like 5xx.
    public init() {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        ownsClient = true
    }

    /// Uses `client`, which the caller shuts down.
    public init(client: HTTPClient) {
        self.client = client
        ownsClient = false
    }

    public func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        var http = HTTPClientRequest(url: request.url.absoluteString)
        http.method = .POST
        for (name, value) in request.headers { http.headers.add(name: name, value: value) }
        http.body = .bytes(ByteBuffer(bytes: request.body))
        do {
            let response = try await client.execute(http, timeout: .nanoseconds(Int64(request.timeout.seconds * 1e9)))
            // Drain (and drop) the body so the connection can be reused; cap what we read.
            _ = try? await response.body.collect(upTo: 1 << 20)
            return .response(status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"))
        } catch {
            return .failure(Self.classify(error))
        }
    }

    public func shutdown() async {
        if ownsClient { try? await client.shutdown() }
    }

    static func classify(_ error: any Error) -> TransportFailure {
        if error is CancellationError { return TransportFailure(.cancelled, "cancelled") }
        if let e = error as? HTTPClientError {
            switch e {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout, .tlsHandshakeTimeout,
                 .getConnectionFromPoolTimeout:
                return TransportFailure(.timeout, "\(e)")
            case .remoteConnectionClosed, .uncleanShutdown: return TransportFailure(.connectionClosed, "\(e)")
            case .cancelled, .requestStreamCancelled: return TransportFailure(.cancelled, "\(e)")
            default: return TransportFailure(.other, "\(e)")
            }
        }
        if error is NIOConnectionError || error is IOError {
            return TransportFailure(.connectionFailed, "\(error)")
        }
        return TransportFailure(.other, "\(error)")
    }
}

/// `HTTPClient` is thread-safe; the references never change.
extension AsyncHTTPClientTransport: @unchecked Sendable {}
#endif

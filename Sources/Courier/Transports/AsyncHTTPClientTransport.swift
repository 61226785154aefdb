#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// POSTs through AsyncHTTPClient: the default on Linux. Against a loopback server that drops
/// connections, it reports each drop at once and never re-sends a POST
/// on its own, where URLSession on Linux hung until its timeout and re-sent POSTs unasked.
///
/// Policies shared with `URLSessionTransport`: `request.timeout` is a deadline for the whole
/// request, body included, and redirects are never followed (a 3xx is reported as it is and
/// retried like a 5xx).
public final class AsyncHTTPClientTransport: DeliveryTransport {
    private let client: HTTPClient
    private let ownsClient: Bool
    private let clock: any Clock<Duration>

    /// Uses its own client, shut down by `shutdown()`. Redirects are not followed: a POST
    /// redirected elsewhere should be an explicit decision, and 3xx is retried like 5xx.
    /// - Parameters:
    ///   - maximumConnectionsPerHost: HTTP/1.1 connections kept to one host. The default is 64,
    ///     `Courier.Configuration.maximumConcurrentDeliveries`'s default (AsyncHTTPClient's own
    ///     is 8: requests beyond it would queue inside the client, hidden from Courier's limit).
    ///     Over HTTP/2 (offered by a server over TLS), requests share one connection instead.
    ///   - clock: what the whole-request deadline is measured on. The default is
    ///     `ContinuousClock()`.
    public init(maximumConnectionsPerHost: Int = 64, clock: any Clock<Duration> = ContinuousClock()) {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(1, maximumConnectionsPerHost)
        // A refused connection is reported at once instead of being retried until the request
        // deadline: otherwise an attempt to a dead port holds a delivery slot for the whole
        // timeout, and a live server beside a dead one is starved (MeasuredFigures.md).
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        ownsClient = true
        self.clock = clock
    }

    /// Uses `client`, which the caller shuts down (configure it with
    /// `redirectConfiguration = .disallow` to keep Courier's redirect policy).
    public init(client: HTTPClient, clock: any Clock<Duration> = ContinuousClock()) {
        self.client = client
        ownsClient = false
        self.clock = clock
    }

    /// POSTs `request` within `request.timeout`; every failure becomes a classified outcome.
    public func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        var http = HTTPClientRequest(url: request.url.absoluteString)
        http.method = .POST
        for (name, value) in request.headers { http.headers.add(name: name, value: value) }
        http.body = .bytes(ByteBuffer(bytes: request.body))
        let client = self.client
        let prepared = http
        let timeout = TimeAmount.nanoseconds(Int64(request.timeout.seconds * 1e9))
        // AHC's own timeout stops at the response head; the deadline covers the body too.
        return await withDeadline(request.timeout, clock: clock) {
            do {
                let response = try await client.execute(prepared, timeout: timeout)
                // Drain (and drop) the body so the connection can be reused; cap what we read.
                _ = try? await response.body.collect(upTo: 1 << 20)
                return .response(status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"))
            } catch {
                return .failure(Self.classify(error))
            }
        }
    }

    public func shutdown() async {
        if ownsClient { try? await client.shutdown() }
    }

    // A transport released without `shutdown()` (a courier dropped without `close()`) must not
    // leak its client (AsyncHTTPClient traps on that in debug builds). Shutting down twice only
    // reports "already shut down" to the callback, which is ignored.
    deinit {
        if ownsClient { client.shutdown { _ in } }
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

/// `HTTPClient` is thread-safe; the references never change; the clock is only read.
extension AsyncHTTPClientTransport: @unchecked Sendable {}
#endif

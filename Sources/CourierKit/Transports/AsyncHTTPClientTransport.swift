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
    ///
    /// With the default clock, the deadline is AsyncHTTPClient's own, kept on the request's
    /// event loop (its delegate API's deadline covers the whole request, body included): the
    /// attempt's task awaits one result, and no timer or second task runs beside it. With an
    /// injected clock, `withDeadline` races the request against a sleep on that clock.
    public func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome { await exchange(request).0 }

    /// `deliver(_:)`, with the server's answer (`ServerAnswer`).
    public func exchange(_ request: DeliveryRequest) async -> (DeliveryOutcome, ServerAnswer?) {
        guard clock is ContinuousClock else {
            return await withDeadline(request.timeout, clock: clock) { [self] in await post(request, deadline: nil) }
        }
        // At most 2^31 s (68 years): a timeout meaning "never" must not overflow.
        return await post(request, deadline: .now() + .nanoseconds(Int64(min(request.timeout.seconds, 0x1p31) * 1e9)))
    }

    /// One POST; cancelling the calling task cancels it.
    private func post(_ request: DeliveryRequest, deadline: NIODeadline?) async -> (DeliveryOutcome, ServerAnswer?) {
        do {
            var http = try template(for: request.url)
            for (name, value) in request.headers { http.headers.add(name: name, value: value) }
            http.body = .bytes(request.body)
            let task = client.execute(request: http, delegate: AnswerReader(), deadline: deadline)
            let answer = try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                task.cancel()
            }
            return (.response(status: answer.status, retryAfter: answer.headers["retry-after"]), answer)
        } catch {
            return (.failure(Self.classify(error)), nil)
        }
    }

    /// A POST to `url` with no headers and no body (an invalid URL throws).
    func template(for url: URL) throws -> HTTPClient.Request {
        try HTTPClient.Request(url: url, method: .POST, tlsConfiguration: nil)
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

/// Keeps a response's status, headers (names lowercased) and its body's first
/// `ServerAnswer.maximumReadBytes`; the rest of the body is drained unread, so the connection is
/// reused and no more is held in memory (the request's deadline bounds the drain).
final class AnswerReader: HTTPClientResponseDelegate {
    private var answer: ServerAnswer?

    func didReceiveHead(task: HTTPClient.Task<ServerAnswer>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        var headers: [String: String] = [:]
        for (name, value) in head.headers { headers[name.lowercased()] = value }
        answer = ServerAnswer(status: Int(head.status.code), headers: headers)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<ServerAnswer>, _ part: ByteBuffer) -> EventLoopFuture<Void> {
        if let kept = answer?.body.count, kept < ServerAnswer.maximumReadBytes {
            answer?.body.append(contentsOf: part.readableBytesView.prefix(ServerAnswer.maximumReadBytes - kept))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<ServerAnswer>) throws -> ServerAnswer {
        // A request finishes only after its head: no head is a closed connection.
        guard let answer else { throw HTTPClientError.remoteConnectionClosed }
        return answer
    }
}

/// Why `AnswerReader` is `Sendable`: AsyncHTTPClient calls a delegate on its request's event
/// loop only, one call at a time, so `answer` is confined to that loop.
extension AnswerReader: @unchecked Sendable {}
#endif

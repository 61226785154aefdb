import Foundation

/// One HTTP POST to make.
public struct DeliveryRequest: Sendable, Hashable {
    /// Where to POST.
    public var url: URL
    /// Includes `Content-Type` and `Idempotency-Key`.
    public var headers: [String: String]
    /// Exactly the bytes `send` stored (gzip-compressed for a destination whose
    /// `DestinationOptions.gzip` is on, with `Content-Encoding: gzip` in `headers`).
    public var body: Data
    /// The whole request must finish within this; the transport enforces it.
    public var timeout: Duration
    /// The message, also sent as `Idempotency-Key` (unless in a batch).
    public var messageID: MessageID
    /// 1 for the first attempt.
    public var attempt: Int
    /// A batch's messages, in body order, `messageID` first (`DestinationOptions.batching`);
    /// empty for a request of one message.
    public var batch: [MessageID] = []
    /// The tags `send` was given: what `prepareRequest` picks credentials by (the account the
    /// message belongs to). Not sent; changing them changes nothing.
    public var tags: Set<String>

    /// A request for attempt `attempt` of message `messageID`.
    public init(
        url: URL, headers: [String: String], body: Data, timeout: Duration, messageID: MessageID, attempt: Int,
        tags: Set<String> = []
    ) {
        self.tags = tags
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.messageID = messageID
        self.attempt = attempt
    }
}

/// Sends one request and reports what happened. Implementations never throw: every failure is
/// a `DeliveryOutcome.failure`, classified for the retry policy. They must honour task
/// cancellation (report `.cancelled`) and `request.timeout`.
///
/// Defaults: URLSession on Apple platforms; AsyncHTTPClient on Linux, where URLSession hangs
/// until its timeout and silently re-sends POSTs when a server drops connections (DocC: "Running on Linux").
public protocol DeliveryTransport: Sendable {
    /// POSTs `request` and reports what happened; never throws.
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome
    /// As `deliver(_:)`, with what the server said when it answered: every header, and its body
    /// (its first `ServerAnswer.maximumReadBytes` at least; `Configuration.batchItemStatuses`
    /// reads it whole). Courier keeps a delivered message's first `maximumBodyBytes`, and of the
    /// headers those `Configuration.answerHeaders` names. The default calls `deliver(_:)` and
    /// keeps the status alone.
    func exchange(_ request: DeliveryRequest) async -> (DeliveryOutcome, ServerAnswer?)
    /// Releases connections. Called once by `Courier.close()`.
    func shutdown() async
}

extension DeliveryTransport {
    public func shutdown() async {}
}

extension Courier.Configuration {
    /// The transport a courier opened with this configuration and no `transport` delivers
    /// through: URLSession on Apple platforms (with this configuration's network-access
    /// policy); AsyncHTTPClient on Linux when the package trait `AsyncHTTPClientTransport` is on.
    /// The caller owns it (`shutdown()` it when done).
    /// - Throws: `CourierError.Code.transportUnavailable` on Linux without that trait.
    public func defaultTransport() throws(CourierError) -> any DeliveryTransport {
        if let problem = Self.defaultTransportProblem { throw problem }
        return makeDefaultTransport()
    }

    /// Why this build has no default transport (with the fix), or nil where it has one.
    static let defaultTransportProblem: CourierError? = {
        #if canImport(FoundationNetworking) && !canImport(AsyncHTTPClient)
        // Never URLSession on Linux: it hangs until its timeout and re-sends POSTs unasked when
        // a server drops connections (DocC: "Running on Linux").
        return CourierError(
            .transportUnavailable,
            """
            Courier has no HTTP transport on Linux unless the package trait "AsyncHTTPClientTransport" \
            is on. Turn it on where your Package.swift depends on Courier: \
            .package(url: "<courier's URL>", from: "<version>", traits: ["AsyncHTTPClientTransport"]) \
            (in Courier's own repository: swift build --traits AsyncHTTPClientTransport), or set \
            Courier.Configuration.transport to a transport of your own. \
            URLSession is never the fallback: on Linux it hangs when a server drops connections.
            """)
        #else
        return nil
        #endif
    }()

    /// The default transport, where `defaultTransportProblem` is nil.
    func makeDefaultTransport() -> any DeliveryTransport {
        #if canImport(AsyncHTTPClient)
        return AsyncHTTPClientTransport(maximumConnectionsPerHost: maximumConcurrentDeliveries)
        #elseif canImport(FoundationNetworking)
        preconditionFailure(
            "no default transport on Linux without AsyncHTTPClient: defaultTransportProblem says so")
        #else
        return URLSessionTransport(configuration: URLSessionTransport.sessionConfiguration(for: self))
        #endif
    }
}

/// What one delivery attempt came to: an HTTP response, or a failure before one arrived.
public enum DeliveryOutcome: Sendable, Hashable, CustomStringConvertible {
    /// The server answered. `retryAfter` is the raw `Retry-After` header, if any.
    case response(status: Int, retryAfter: String? = nil)
    /// No response: timeout, connection refused or dropped, TLS, …
    case failure(TransportFailure)

    /// Whether the server answered 2xx: the message is delivered.
    public var isSuccess: Bool {
        if case .response(let status, _) = self { return (200..<300).contains(status) }
        return false
    }

    /// HTTP 401: the credentials were refused (with `prepareRequest`, the next attempt brings
    /// fresh ones; see `RetryPolicy.retriesUnauthorized`).
    public var isUnauthorized: Bool {
        if case .response(401, _) = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .response(let status, let retryAfter):
            return "HTTP \(status)" + (retryAfter.map { " (Retry-After: \($0))" } ?? "")
        case .failure(let failure): return failure.description
        }
    }

    /// The statuses whose `Retry-After` the retry policy honours: 429 and 503.
    static func honoursRetryAfter(status: Int) -> Bool { status == 429 || status == 503 }
}

extension DeliveryTransport {
    public func exchange(_ request: DeliveryRequest) async -> (DeliveryOutcome, ServerAnswer?) {
        let outcome = await deliver(request)
        guard case .response(let status, _) = outcome else { return (outcome, nil) }
        return (outcome, ServerAnswer(status: status))
    }
}

/// What the server answered a delivered message (`Courier.delivered(_:)`): its status, the headers
/// `Configuration.answerHeaders` names, and its body's first 16 KiB. Kept in the log with the
/// message's `delivered` record, so also after a restart, until compaction drops the message
/// (then, while `delivered(_:)` remembers it, the status alone).
public struct ServerAnswer: Sendable, Hashable {
    /// The HTTP status: 2xx.
    public var status: Int
    /// The answer's headers that `Configuration.answerHeaders` names, by their names there.
    public var headers: [String: String]
    /// The body's first `maximumBodyBytes` (empty for none).
    public var body: Data

    /// 16 KiB: what a chat server's id and timestamp need many times over, and what the log
    /// keeps per delivered message at most.
    public static let maximumBodyBytes = 16 << 10
    /// 1 MiB: how much of an answer's body the built-in transports read (the rest is drained),
    /// for `Configuration.batchItemStatuses` to read a large batch's answer whole.
    public static let maximumReadBytes = 1 << 20

    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The headers of `all` named in `kept` (matched without regard to case), under those names,
    /// and at most `bodyBytes` of the body (what a log record of the message can hold), each
    /// header value at most 1 KiB.
    func keeping(_ kept: Set<String>, bodyBytes: Int = maximumBodyBytes) -> ServerAnswer {
        var answer = ServerAnswer(status: status, body: Data(body.prefix(max(0, bodyBytes))))
        for name in kept {
            if let value = headers.first(where: { $0.key.caseInsensitiveCompare(name) == .orderedSame })?.value,
                value.utf8.count <= 1024
            {
                answer.headers[name] = value
            }
        }
        return answer
    }
}

/// A transport-level failure, classified so the retry policy can decide without knowing which
/// HTTP stack produced it.
public struct TransportFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The class of failure (stored in the log as its raw value).
    public enum Kind: UInt8, Sendable, Hashable {
        /// No response within `Configuration.requestTimeout`.
        case timeout = 1
        /// The connection was closed or reset before a response (a "drop").
        case connectionClosed = 2
        /// Could not connect (refused, unreachable, DNS).
        case connectionFailed = 3
        /// TLS handshake or certificate failure.
        case tls = 4
        /// The attempt was cancelled (by `close()`); not counted as an attempt.
        case cancelled = 5
        /// Anything else.
        case other = 6
        /// `Configuration.prepareRequest` threw: nothing was sent. Retried under the policy
        /// like any failed attempt; says nothing about the destination's health.
        case requestPreparation = 7
    }

    /// The class of failure, which the retry policy and destination backoff act on.
    public var kind: Kind
    /// The transport's own words, for people and logs.
    public var message: String

    /// A failure of `kind`, described by `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind) (\(message))" }
}

/// Why the retry policy gave up on a message (`CourierEvent.abandoned`,
/// `MessageStatus.State.abandoned`): a value a screen can switch over. Its `description` is what
/// the log records, and what `CourierError.message` says when `delivered(_:)` throws
/// `.abandoned`, in this run or after a restart.
public enum AbandonReason: Sendable, Hashable, CustomStringConvertible {
    /// The server's answer is one the classifier gives up on at once
    /// (`RetryPolicy.Classifier.giveUpOnClientErrors`: a 4xx it does not retry).
    case clientError(status: Int)
    /// `RetryPolicy.maximumAttempts` attempts were made; `lastOutcome` ended the last one.
    case attemptsExhausted(attempts: Int, lastOutcome: DeliveryOutcome)
    /// The next attempt would come more than `RetryPolicy.expiry` after `send`; `lastOutcome`
    /// ended the last one.
    case expired(expiry: Duration, lastOutcome: DeliveryOutcome)
    /// `Configuration.maximumPendingMessages` were pending when another message was sent, and
    /// this was the oldest pending one with a `.dropOldest` tag (`whenFull`): `tag`.
    case dropped(tag: String)

    public var description: String {
        switch self {
        case .clientError(let status):
            "HTTP \(status) is a client error (policy gives up on 4xx)"
        case .attemptsExhausted(let attempts, let last):
            "\(attempts) attempts, the maximum; last: \(last)"
        case .expired(let expiry, let last):
            "expired: next try would be past \(expiry) since send; last: \(last)"
        case .dropped(let tag):
            "dropped to make room: the pending messages were at maximumPendingMessages, and tag \(tag) drops the oldest"
        }
    }
}

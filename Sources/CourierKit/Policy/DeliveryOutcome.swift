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
}

extension DeliveryOutcome {
    /// The statuses whose `Retry-After` the retry policy honours: 429 and 503.
    static func honoursRetryAfter(status: Int) -> Bool { status == 429 || status == 503 }

    /// Whether the answer carried a `Retry-After` the policy honours, so the next due time may
    /// be the server's rather than backoff's.
    var carriesRetryAfter: Bool {
        if case .response(let status, let header?) = self {
            return Self.honoursRetryAfter(status: status) && !header.isEmpty
        }
        return false
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

    public var description: String {
        switch self {
        case .clientError(let status):
            "HTTP \(status) is a client error (policy gives up on 4xx)"
        case .attemptsExhausted(let attempts, let last):
            "\(attempts) attempts, the maximum; last: \(last)"
        case .expired(let expiry, let last):
            "expired: next try would be past \(expiry) since send; last: \(last)"
        }
    }
}

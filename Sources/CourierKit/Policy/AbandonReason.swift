import Foundation

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

import CourierKit
import Foundation

/// One line of the message list: what was sent and where it stands.
public struct MessageRow: Sendable, Equatable, Identifiable {
    public enum State: Sendable, Equatable {
        case queued
        case sending(attempt: Int)
        /// Handed to the system's background upload session (iOS delivers it while suspended).
        case handedOff(attempt: Int)
        case failed(attempt: Int, reason: String, nextAttemptAt: Date)
        case delivered(attempts: Int, after: TimeInterval)
        case abandoned(reason: String)
    }

    public let id: MessageID
    public var text: String
    public var sentAt: Date
    /// Sent in an earlier run and resumed by this one.
    public var resumed: Bool
    public var state: State

    /// `queued`, `sending (attempt 2)`, `attempt 3 failed (500) — next in 2.4 s`,
    /// `delivered after 4 attempts (7.1 s)`, `abandoned: …`.
    public func status(now: Date) -> String {
        switch state {
        case .queued: return "queued"
        case .sending(let attempt): return "sending (attempt \(attempt))"
        case .handedOff(let attempt): return "handed to iOS (attempt \(attempt))"
        case .failed(let attempt, let reason, let next):
            let seconds = max(0, next.timeIntervalSince(now))
            return "attempt \(attempt) failed (\(reason)) — next in \(String(format: "%.1f", seconds)) s"
        case .delivered(let attempts, let after):
            return "delivered after \(attempts) attempt\(attempts == 1 ? "" : "s") (\(String(format: "%.1f", after)) s)"
        case .abandoned(let reason): return "abandoned: \(reason)"
        }
    }

    /// Whether `status(now:)` changes with time (a countdown to the next attempt): only such
    /// rows need redrawing while nothing happens.
    public var isCountingDown: Bool {
        if case .failed = state { return true }
        return false
    }

    /// A short reason: the status code, or the kind of transport failure.
    static func reason(_ outcome: DeliveryOutcome) -> String {
        switch outcome {
        case .response(let status, _): return String(status)
        case .failure(let f):
            switch f.kind {
            case .timeout: return "timeout"
            case .connectionClosed: return "connection dropped"
            case .connectionFailed: return "cannot connect"
            case .tls: return "TLS"
            case .cancelled: return "cancelled"
            case .other: return "error"
            case .requestPreparation: return "prepareRequest failed"
            }
        }
    }
}

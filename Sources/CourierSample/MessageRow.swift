import CourierKit
import Foundation

/// One line of the message list, from a message's status (`CourierModel`): what was sent, when,
/// and where it stands, in words.
public struct MessageRow: Sendable, Equatable, Identifiable {
    public let id: MessageID
    /// The `text` of a `{"text": …}` body, or the body itself.
    public var text: String
    public var sentAt: Date?
    /// Sent before this run started, and resumed by it.
    public var resumed: Bool
    public var status: MessageStatus

    /// The row of `status`; `launchedAt` tells a message of this run from a resumed one.
    public init(_ status: MessageStatus, launchedAt: Date) {
        id = status.id
        text = Self.text(of: status.body)
        sentAt = status.sentAt
        resumed = status.sentAt.map { $0 < launchedAt } ?? false
        self.status = status
    }

    /// `queued`, `sending (attempt 2)`, `attempt 3 failed (500) — next in 2.4 s`,
    /// `delivered after 4 attempts (7.1 s)`, `abandoned: …`, `cancelled`.
    public func status(now: Date) -> String {
        switch status.state {
        case .queued: return "queued"
        case .sending(let attempt): return "sending (attempt \(attempt))"
        case .handedOff(let attempt): return "handed to iOS (attempt \(attempt))"
        case .waiting(let next, let failure):
            let seconds = max(0, next.timeIntervalSince(now))
            return "attempt \(status.attempts) failed (\(Self.reason(failure))) — next in "
                + "\(String(format: "%.1f", seconds)) s"
        case .delivered:
            let attempts = status.attempts
            let took = zip(status.sentAt, status.changedAt).map {
                String(format: " (%.1f s)", $1.timeIntervalSince($0))
            }
            return "delivered after \(attempts) attempt\(attempts == 1 ? "" : "s")\(took ?? "")"
        case .abandoned(let reason): return "abandoned: \(reason)"
        case .cancelled: return "cancelled"
        }
    }

    /// Whether `status(now:)` changes with time (a countdown to the next attempt): only such
    /// rows need redrawing while nothing happens.
    public var isCountingDown: Bool {
        if case .waiting = status.state { return true }
        return false
    }

    /// A short reason: the status code, or the kind of transport failure ("before restart"
    /// when the failure came before this run: the log keeps when, not why).
    static func reason(_ outcome: DeliveryOutcome?) -> String {
        switch outcome {
        case nil: return "before restart"
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

    /// The `text` of a `{"text": …}` body, or the body itself.
    static func text(of body: Data?) -> String {
        guard let body else { return "" }
        if let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let text = object["text"] as? String
        {
            return text
        }
        return String(decoding: body, as: UTF8.self)
    }

    /// The server's state line, from the model's destinations: down, or back; nil if none was
    /// ever reported down.
    public static func serverStatus(_ destinations: [DestinationStatus]) -> String? {
        if let down = destinations.first(where: \.isDown) {
            return "server down (\(down.consecutiveFailures) failures in a row at \(down.origin)): messages wait, "
                + "one probe at a time"
        }
        return destinations.last.map { "server back (\($0.origin)): waiting messages resumed" }
    }
}

private func zip<A, B>(_ a: A?, _ b: B?) -> (A, B)? {
    guard let a, let b else { return nil }
    return (a, b)
}

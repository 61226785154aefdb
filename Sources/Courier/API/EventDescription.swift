import CourierLog
import Foundation

/// A log record as the messaging layer reads it, for tools such as `wal-dump`.
public struct EventDescription: Sendable, Equatable {
    /// The message the record concerns, exactly as used in `Idempotency-Key`.
    public var messageID: MessageID
    /// Whether this record ends the message's life (delivered, abandoned, cancelled).
    public var isTerminal: Bool
    /// A few `key=value` facts: destination, attempt, outcome, next due time, …
    public var details: [Detail]

    /// One named field of a record, as `wal-dump` prints it.
    public struct Detail: Sendable, Equatable {
        /// The field's name (a `wal-dump --json` key).
        public var key: String
        /// Its value, as text.
        public var value: String
    }

    /// Decodes a record written by Courier, or nil if it is not one.
    public init?(_ record: LogRecord) {
        guard let event = Event.decode(kind: record.kind, body: record.body) else { return nil }
        messageID = event.id
        var d: [Detail] = []
        func add(_ k: String, _ v: String) { d.append(Detail(key: k, value: v)) }
        switch event {
        case .enqueued(let s), .snapshot(let s):
            isTerminal = false
            add("url", s.url)
            add("attempts", String(s.attempts))
            add("due", Self.iso(s.nextDueMilliseconds))
        case .attempted(_, let attempt, let outcome, let due):
            isTerminal = false
            add("attempt", String(attempt))
            add("outcome", outcome.description)
            add("due", Self.iso(due))
        case .delivered(_, let attempt, let status):
            isTerminal = true
            add("attempt", String(attempt))
            add("status", String(status))
        case .abandoned(_, let attempt, let reason):
            isTerminal = true
            add("attempt", String(attempt))
            add("reason", reason)
        case .cancelled:
            isTerminal = true
        case .handedOff(_, let task):
            isTerminal = false
            add("attempt", String(task.attempt))
            add("task", String(task.taskIdentifier))
            add("ticket", HandOff.hex(task.ticket))
            add("begin", Self.iso(task.earliestBeginMilliseconds))
        }
        details = d
    }

    static func iso(_ ms: UInt64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }
}

import CourierKit
import CourierLog
import Foundation

/// A log record as the messaging layer reads it: decoded once, through Courier's own decoder
/// (`Event`, `package`), so `wal-dump` prints the message id and the event's details. A record
/// Courier did not write (or one this version cannot read) stays opaque: nil.
struct CourierRecord {
    /// The message the record concerns, exactly as used in `Idempotency-Key`; nil for a tag's
    /// record (`held`, `released`).
    var messageID: String?
    /// The tag a `held` or `released` record names.
    var tag: String?
    /// Whether this record ends the message's life (delivered, abandoned, cancelled).
    var isTerminal: Bool
    /// A full state's replacement key: the record also ends the key's earlier holder.
    var replacing: String?
    /// A few `key=value` facts, in print order: destination, attempt, outcome, next due time, …
    /// (the keys are `wal-dump --json` keys).
    var details: [(key: String, value: String)] = []

    init?(_ record: LogRecord) {
        guard let event = Event.decode(kind: record.kind, body: record.body) else { return nil }
        messageID = event.id?.description
        isTerminal = false
        switch event {
        case .enqueued(let s), .snapshot(let s):
            add("url", s.url)
            add("attempts", String(s.attempts))
            add("due", iso8601(milliseconds: s.nextDueMilliseconds))
            if let key = s.orderingKey { add("key", key) }
            if !s.tags.isEmpty { add("tags", s.tags.joined(separator: ",")) }
            replacing = s.replacing
            if let replacing { add("replacing", replacing) }
            if let expiry = s.expiryMilliseconds { add("expiry_ms", String(expiry)) }
        case .attempted(_, let attempt, let outcome, let due):
            add("attempt", String(attempt))
            add("outcome", outcome.description)
            add("due", iso8601(milliseconds: due))
        case .delivered(_, let attempt, let status, let headers, let body):
            isTerminal = true
            add("attempt", String(attempt))
            add("status", String(status))
            if !headers.isEmpty {
                add("answer_headers", headers.map { "\($0.name): \($0.value)" }.joined(separator: "; "))
            }
            if !body.isEmpty { add("answer_bytes", String(body.count)) }
        case .abandoned(_, let attempt, let reason):
            isTerminal = true
            add("attempt", String(attempt))
            add("reason", reason)
        case .cancelled:
            isTerminal = true
        case .handedOff(_, let task):
            add("attempt", String(task.attempt))
            add("task", String(task.taskIdentifier))
            let ticket = String(task.ticket, radix: 16)
            add("ticket", String(repeating: "0", count: 16 - ticket.count) + ticket)
            add("begin", iso8601(milliseconds: task.earliestBeginMilliseconds))
        case .held(let tag), .released(let tag):
            self.tag = tag
            add("tag", tag)
        }
    }

    private mutating func add(_ key: String, _ value: String) { details.append((key, value)) }
}

import Foundation

/// What a screen shows of one message (`CourierModel`, `CourierObservableObject`).
public struct MessageStatus: Sendable, Hashable, Identifiable {
    /// Where the message is on its way.
    public enum State: Sendable, Hashable {
        /// On disk, waiting for its first attempt.
        case queued
        /// An attempt is under way (1-based, counted across restarts).
        case sending(attempt: Int)
        /// Handed to iOS's background upload session: the system sends it, even while the app
        /// is suspended.
        case handedOff(attempt: Int)
        /// Failed; the next attempt is due at `until` (its destination's pace or outage may hold
        /// it longer). `after` is the failure, nil for one from before the app last started
        /// (the log keeps when, not why).
        case waiting(until: Date, after: DeliveryOutcome?)
        /// The server answered 2xx.
        case delivered
        /// The retry policy gave up: it is never sent again.
        case abandoned(reason: AbandonReason)
        /// The app cancelled it (`Courier.cancel(_:)`).
        case cancelled

        /// Delivered, abandoned or cancelled: nothing more happens to it.
        public var isResolved: Bool {
            switch self {
            case .delivered, .abandoned, .cancelled: true
            case .queued, .sending, .handedOff, .waiting: false
            }
        }
    }

    /// The id `send` returned.
    public let id: MessageID
    public var state: State
    /// Attempts made so far, across restarts.
    public var attempts: Int
    /// Where it is POSTed: known for a message sent through the model or pending when it
    /// started, nil for one it first heard of by an event.
    public var url: URL?
    /// The bytes POSTed, when known (as `url`).
    public var body: Data?
    /// When `send` was called, when known (as `url`).
    public var sentAt: Date?
    /// When the model last saw its state change (delivered at, say); nil if it was listed from
    /// the courier's state and has not changed since.
    public var changedAt: Date?

    /// A status with these fields.
    public init(
        id: MessageID, state: State, attempts: Int = 0, url: URL? = nil, body: Data? = nil, sentAt: Date? = nil,
        changedAt: Date? = nil
    ) {
        self.id = id
        self.state = state
        self.attempts = attempts
        self.url = url
        self.body = body
        self.sentAt = sentAt
        self.changedAt = changedAt
    }
}

/// What a model knows of a destination (an origin: `https://host:443`) from its events: up
/// until it is reported down (`DestinationBackoff`), up again when a probe is answered.
public struct DestinationStatus: Sendable, Hashable, Identifiable {
    /// Scheme, host and port.
    public var origin: URL
    /// Down: its messages wait while one probe at a time checks it.
    public var isDown: Bool
    /// When it went down, or came back.
    public var since: Date
    /// The failing attempts in a row that made it down (0 once it is up).
    public var consecutiveFailures: Int

    public var id: URL { origin }

    /// A status with these fields (a model makes them from events; tests and previews too).
    public init(origin: URL, isDown: Bool, since: Date, consecutiveFailures: Int) {
        self.origin = origin
        self.isDown = isDown
        self.since = since
        self.consecutiveFailures = consecutiveFailures
    }
}

extension MessageStatus: CustomStringConvertible {
    /// Where the message stands, in words, now (`summary(at:)`): what `Text("\(message)")` shows.
    public var description: String { summary(at: Date()) }

    /// Where the message stands, in words, at `now`: `queued`, `sending (attempt 2)`,
    /// `handed to iOS (attempt 1)`, `attempt 3 failed (500) — next in 2.4 s`,
    /// `delivered after 4 attempts (7.1 s)` (the time from `send`, when known),
    /// `abandoned: <reason>`, `cancelled`.
    public func summary(at now: Date) -> String {
        switch state {
        case .queued: return "queued"
        case .sending(let attempt): return "sending (attempt \(attempt))"
        case .handedOff(let attempt): return "handed to iOS (attempt \(attempt))"
        case .waiting(let next, let failure):
            let seconds = String(format: "%.1f", max(0, next.timeIntervalSince(now)))
            return "attempt \(attempts) failed (\(Self.reason(failure))) — next in \(seconds) s"
        case .delivered:
            let took = sentAt.flatMap { sent in
                changedAt.map { String(format: " (%.1f s)", $0.timeIntervalSince(sent)) }
            }
            return "delivered after \(attempts) attempt\(attempts == 1 ? "" : "s")\(took ?? "")"
        case .abandoned(let reason): return "abandoned: \(reason)"
        case .cancelled: return "cancelled"
        }
    }

    /// A short reason: the status code, or the kind of transport failure ("before restart"
    /// when the failure came before this run: the log keeps when, not why).
    private static func reason(_ outcome: DeliveryOutcome?) -> String {
        switch outcome {
        case nil: "before restart"
        case .response(let status, _): String(status)
        case .failure(let failure):
            switch failure.kind {
            case .timeout: "timeout"
            case .connectionClosed: "connection dropped"
            case .connectionFailed: "cannot connect"
            case .tls: "TLS"
            case .cancelled: "cancelled"
            case .other: "error"
            case .requestPreparation: "prepareRequest failed"
            }
        }
    }
}

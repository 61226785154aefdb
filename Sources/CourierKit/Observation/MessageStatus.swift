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

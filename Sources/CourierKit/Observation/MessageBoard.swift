import Foundation

/// The state behind `CourierModel` and `CourierObservableObject`, with no I/O and no actor: the
/// pending messages it was loaded with, moved along by events; resolved ones kept for a while
/// (the newest `keepsResolved`), so a screen can show "delivered". Pure, and tested as such.
struct MessageBoard: Equatable {
    /// Pending and recently resolved messages, oldest first.
    private(set) var messages: [MessageStatus] = []
    private var index: [MessageID: Int] = [:]
    private(set) var destinations: [DestinationStatus] = []
    /// Events a reader fell too far behind to read (`.missedEvents`), over the model's life:
    /// after each gap the state was read again, so the list is right; this says it happened.
    private(set) var missedEventCount = 0
    /// The last storage trouble reported (`.storageFailed`), if any.
    private(set) var storageProblem: CourierError?
    /// Whether the courier's state was read once (`load`).
    private(set) var hasLoaded = false
    let keepsResolved: Int

    init(keepsResolved: Int) {
        precondition(keepsResolved >= 0)
        self.keepsResolved = keepsResolved
    }

    /// Messages not yet resolved.
    var pendingCount: Int { messages.reduce(0) { $0 + ($1.state.isResolved ? 0 : 1) } }

    func status(of id: MessageID) -> MessageStatus? { index[id].map { messages[$0] } }

    /// The state read from the courier (at the start, and after a gap), as it was at `asked`:
    /// pending messages are replaced by what it says; resolved ones stay, and so does a message
    /// that changed after `asked` (one the model sent while the list was read). A message listed
    /// before and missing from the list resolved in the gap: it goes (how it ended is unknown).
    mutating func load(_ pending: [PendingMessage], asked: Date) {
        hasLoaded = true
        let pendingIDs = Set(pending.map(\.id))
        messages = messages.filter {
            !pendingIDs.contains($0.id) && ($0.state.isResolved || ($0.changedAt.map { $0 > asked } ?? false))
        }
        for message in pending {
            let state: MessageStatus.State =
                message.isHandedOff
                ? .handedOff(attempt: message.attempts + 1)
                : message.attempts == 0 ? .queued : .waiting(until: message.nextAttemptAt, after: nil)
            messages.append(
                MessageStatus(
                    id: message.id, state: state, attempts: message.attempts, url: message.url, body: message.body,
                    sentAt: message.sentAt))
        }
        reindex()
    }

    /// One change the follower brings (`ModelFollower.Update`).
    mutating func apply(_ update: ModelFollower.Update) {
        switch update {
        case .load(let pending, let asked): load(pending, asked: asked)
        case .event(let event, let now): apply(event, now: now)
        }
    }

    /// Sends `json` through `courier` (`Courier.send`) and lists the message at once, with its
    /// URL and body: what both models' `send` does.
    mutating func send(
        _ json: [String: Any], to url: URL, orderingKey: String?, headers: [String: String], tags: Set<String>,
        through courier: Courier
    ) throws(CourierError) -> MessageID {
        let (id, body) = try courier.sendReturningBody(
            json, to: url, orderingKey: orderingKey, headers: headers, tags: tags)
        didSend(id, url: url, body: body, at: courier.wallDate())
        return id
    }

    /// A message the model sent itself: known from the start with its URL and body.
    mutating func didSend(_ id: MessageID, url: URL, body: Data, at date: Date) {
        guard index[id] == nil else { return }  // its `.enqueued` came first
        index[id] = messages.count
        messages.append(MessageStatus(id: id, state: .queued, url: url, body: body, sentAt: date, changedAt: date))
    }

    /// Moves a message (or a destination) along.
    mutating func apply(_ event: CourierEvent, now: Date) {
        switch event {
        case .enqueued(let id):
            if index[id] == nil {
                index[id] = messages.count
                messages.append(MessageStatus(id: id, state: .queued, changedAt: now))
            }
        case .attemptStarted(let id, let number):
            update(id, at: now) { $0.state = .sending(attempt: number) }
        case .handedOff(let id, let attempt):
            update(id, at: now) { $0.state = .handedOff(attempt: attempt) }
        case .failed(let id, let attempt, let outcome, let next):
            update(id, at: now) {
                $0.attempts = attempt
                if let next { $0.state = .waiting(until: next, after: outcome) }  // else `.abandoned` follows
            }
        case .delivered(let id, let attempts):
            resolve(id, .delivered, attempts: attempts, at: now)
        case .abandoned(let id, let attempts, let reason):
            resolve(id, .abandoned(reason: reason), attempts: attempts, at: now)
        case .cancelled(let id):
            resolve(id, .cancelled, attempts: nil, at: now)
        case .storageFailed(let problem):
            storageProblem = problem
        case .destinationDown(let origin, let failures):
            setDestination(DestinationStatus(origin: origin, isDown: true, since: now, consecutiveFailures: failures))
        case .destinationRecovered(let origin, _, _):
            setDestination(DestinationStatus(origin: origin, isDown: false, since: now, consecutiveFailures: 0))
        case .missedEvents(let count):
            missedEventCount += count  // the follower reads the state again (`load`)
        }
    }

    private mutating func update(_ id: MessageID, at now: Date, _ change: (inout MessageStatus) -> Void) {
        guard let i = index[id] else { return }
        change(&messages[i])
        messages[i].changedAt = now
    }

    private mutating func resolve(_ id: MessageID, _ state: MessageStatus.State, attempts: Int?, at now: Date) {
        update(id, at: now) {
            $0.state = state
            if let attempts { $0.attempts = attempts }
        }
        // Bounded: at most one resolved message over the limit at a time.
        var resolved = messages.reduce(0) { $0 + ($1.state.isResolved ? 1 : 0) }
        guard resolved > keepsResolved else { return }
        messages.removeAll { message in
            guard resolved > keepsResolved, message.state.isResolved else { return false }
            resolved -= 1
            return true
        }
        reindex()
    }

    private mutating func setDestination(_ status: DestinationStatus) {
        if let i = destinations.firstIndex(where: { $0.origin == status.origin }) {
            destinations[i] = status
        } else {
            destinations.append(status)
        }
    }

    private mutating func reindex() {
        index = Dictionary(uniqueKeysWithValues: messages.enumerated().map { ($1.id, $0) })
    }
}

import Foundation

/// The state behind `CourierModel` and `CourierObservableObject`, with no I/O and no actor: the
/// pending messages it was loaded with, moved along by events; resolved ones kept for a while
/// (the newest `keepsResolved`), so a screen can show "delivered". Pure, and tested as such.
///
/// **An event costs O(1) (amortized), whatever the backlog**: statuses sit in a dictionary;
/// the list order is an array that a message leaving only marks (it is swept once the marks
/// outnumber the listed, so a sweep's cost is spread over the removals that made it); the
/// counts are kept, not recounted; the resolved wait in the order they resolved, so the oldest
/// is dropped without a search. Only `load` (at the start and after a gap) and reading the whole
/// list cost O(n). `apply` says what changed, so a model tells only the views that read it.
/// A listed message costs its `MessageStatus` and its share of the dictionary and the order
/// (URLs shared; bodies only if kept), measured by `courier-bench --model`.
struct MessageBoard {
    /// Listed messages, each without its body unless `keepsBodies`.
    private var statuses: [MessageID: MessageStatus] = [:]
    /// Listed ids, oldest first, and ids no longer listed (`statuses` has none): `swept` away.
    private var order: [MessageID] = []
    /// Resolved ids not dropped yet, in the order they resolved.
    private var resolvedQueue = FIFOQueue<MessageID>()
    private(set) var resolvedCount = 0
    private(set) var handedOffCount = 0
    private(set) var destinations: [DestinationStatus] = []
    /// Events a reader fell too far behind to read (`.missedEvents`), over the model's life:
    /// after each gap the state was read again, so the list is right; this says it happened.
    private(set) var missedEventCount = 0
    /// The last storage trouble reported (`.storageFailed`), if any.
    private(set) var storageProblem: CourierError?
    /// Whether the courier's state was read once (`load`).
    private(set) var hasLoaded = false
    let keepsResolved: Int
    /// Whether statuses keep the body (a model made with `keepingBodies`).
    let keepsBodies: Bool

    /// What one change touched: the models tell the views that read it, and no other.
    struct Change: Equatable {
        /// Messages whose status changed (joined or left included).
        var messages: [MessageID] = []
        /// Messages joined or left the list.
        var membership = false
        /// Everything may have changed (`load`).
        var everything = false
    }

    init(keepsResolved: Int, keepsBodies: Bool = true) {
        self.keepsResolved = max(0, keepsResolved)
        self.keepsBodies = keepsBodies
    }

    /// Messages not yet resolved.
    var pendingCount: Int { statuses.count - resolvedCount }
    /// Listed ids, oldest first. O(n).
    var ids: [MessageID] { order.filter { statuses[$0] != nil } }
    /// Pending and recently resolved messages, oldest first. O(n).
    var messages: [MessageStatus] { order.compactMap { status(of: $0) } }

    func status(of id: MessageID) -> MessageStatus? { statuses[id] }

    /// The state read from the courier (at the start, and after a gap), as it was at `asked`:
    /// pending messages are replaced by what it says; resolved ones stay, and so does a message
    /// that changed after `asked` (one the model sent while the list was read). A message listed
    /// before and missing from the list resolved in the gap: it goes (how it ended is unknown).
    @discardableResult
    mutating func load(_ pending: [PendingMessage], asked: Date) -> Change {
        hasLoaded = true
        let pendingIDs = Set(pending.map(\.id))
        let kept = messages.filter {
            !pendingIDs.contains($0.id) && ($0.state.isResolved || ($0.changedAt.map { $0 > asked } ?? false))
        }
        statuses = [:]
        order = []
        (resolvedCount, handedOffCount) = (0, 0)
        for status in kept { list(status) }
        // Read from the log one per message: shared (one instance per destination), a list of
        // 10,000 holds a few.
        var urls: Set<URL> = []
        for message in pending {
            let state: MessageStatus.State =
                message.isHandedOff
                ? .handedOff(attempt: message.attempts + 1)
                : message.attempts == 0 ? .queued : .waiting(until: message.nextAttemptAt, after: nil)
            list(
                MessageStatus(
                    id: message.id, state: state, attempts: message.attempts,
                    url: urls.insert(message.url).memberAfterInsert,
                    body: message.body, sentAt: message.sentAt))
        }
        // `resolvedQueue` stays: resolved messages stay listed (one the courier says is pending
        // is skipped when its turn to be dropped comes).
        return Change(membership: true, everything: true)
    }

    /// A message the model sent itself: known from the start with its URL (and body, if kept).
    @discardableResult
    mutating func didSend(_ id: MessageID, url: URL, body: Data, at date: Date) -> Change {
        guard statuses[id] == nil else { return Change() }  // its `.enqueued` came first
        list(MessageStatus(id: id, state: .queued, url: url, body: body, sentAt: date, changedAt: date))
        return Change(messages: [id], membership: true)
    }

    /// Moves a message (or a destination) along.
    @discardableResult
    mutating func apply(_ event: CourierEvent, now: Date) -> Change {
        switch event {
        case .enqueued(let id):
            guard statuses[id] == nil else { return Change() }
            list(MessageStatus(id: id, state: .queued, changedAt: now))
            return Change(messages: [id], membership: true)
        case .attemptStarted(let id, let number):
            return update(id, at: now) { $0.state = .sending(attempt: number) }
        case .handedOff(let id, let attempt):
            return update(id, at: now) { $0.state = .handedOff(attempt: attempt) }
        case .failed(let id, let attempt, let outcome, let next):
            return update(id, at: now) {
                $0.attempts = attempt
                if let next { $0.state = .waiting(until: next, after: outcome) }  // else `.abandoned` follows
            }
        case .delivered(let id, let attempts):
            return resolve(id, .delivered, attempts: attempts, at: now)
        case .abandoned(let id, let attempts, let reason):
            return resolve(id, .abandoned(reason: reason), attempts: attempts, at: now)
        case .cancelled(let id):
            return resolve(id, .cancelled, attempts: nil, at: now)
        case .storageFailed(let problem):
            storageProblem = problem
        case .destinationDown(let origin, let failures):
            setDestination(DestinationStatus(origin: origin, isDown: true, since: now, consecutiveFailures: failures))
        case .destinationRecovered(let origin, _, _):
            setDestination(DestinationStatus(origin: origin, isDown: false, since: now, consecutiveFailures: 0))
        case .missedEvents(let count):
            missedEventCount += count  // the follower reads the state again (`load`)
        }
        return Change()
    }

    /// Lists `status` last (its body only if kept), counting it.
    private mutating func list(_ status: MessageStatus) {
        var status = status
        if !keepsBodies { status.body = nil }
        statuses[status.id] = status
        order.append(status.id)
        count(status.state, as: 1)
    }

    private mutating func count(_ state: MessageStatus.State, as sign: Int) {
        if state.isResolved { resolvedCount += sign }
        if case .handedOff = state { handedOffCount += sign }
    }

    private mutating func update(_ id: MessageID, at now: Date, _ change: (inout MessageStatus) -> Void) -> Change {
        // Nothing happens to a resolved message (the engine says so once): a stray event must not
        // make it pending again while it waits in `resolvedQueue` to be dropped.
        guard var status = statuses[id], !status.state.isResolved else { return Change() }
        count(status.state, as: -1)
        change(&status)
        status.changedAt = now
        statuses[id] = status
        count(status.state, as: 1)
        return Change(messages: [id])
    }

    private mutating func resolve(_ id: MessageID, _ state: MessageStatus.State, attempts: Int?, at now: Date)
        -> Change
    {
        var change = update(id, at: now) {
            $0.state = state
            if let attempts { $0.attempts = attempts }
        }
        guard !change.messages.isEmpty else { return change }  // unknown, or resolved already
        resolvedQueue.append(id)
        // Bounded: each resolution drops at most one; stale entries are skipped.
        while resolvedCount > keepsResolved, let oldest = resolvedQueue.popFirst() {
            // Skipped if gone, or pending again (a `load` lists what the courier says).
            guard let status = statuses[oldest], status.state.isResolved else { continue }
            statuses[oldest] = nil
            count(status.state, as: -1)
            change.messages.append(oldest)
            change.membership = true
        }
        sweep()
        return change
    }

    /// Drops unlisted ids from `order` once they are the majority: O(n) once per n removals
    /// (`resolvedQueue` compacts itself alike). `list` appends only ids not listed, so `order`
    /// holds the listed ones and, beyond their count, the unlisted since the last sweep.
    private mutating func sweep() {
        let unlisted = order.count - statuses.count
        if unlisted > 64, unlisted > statuses.count {
            order.removeAll { statuses[$0] == nil }
        }
    }

    private mutating func setDestination(_ status: DestinationStatus) {
        if let i = destinations.firstIndex(where: { $0.origin == status.origin }) {
            destinations[i] = status
        } else {
            destinations.append(status)
        }
    }
}

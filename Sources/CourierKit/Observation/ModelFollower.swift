import CourierLog
import Foundation

/// What `CourierModel` and `CourierObservableObject` share: a board, the courier it follows,
/// and opening one. Each tells its views of a board change its own way (`change`).
@MainActor
protocol FollowingModel: AnyObject {
    var courier: Courier? { get set }
    var openError: CourierError? { get set }
    /// The `open` under way, which a second `open` waits for.
    var opening: Task<Void, Never>? { get set }
    var follower: FollowerTask { get }
    /// Runs `body` on the board and tells the views that read what it changed.
    func change(_ body: (inout MessageBoard) -> MessageBoard.Change)
}

extension FollowingModel {
    /// Follows `courier` from now on: the pending messages and a stream from that instant on
    /// (`pendingMessagesAndEvents()`), every event applied on the main actor; after a gap
    /// (`.missedEvents`) the state is read again with a new stream, so the model is never
    /// silently stale. It ends when the courier closes or the model goes away (held weakly: its
    /// `deinit` cancels the task).
    func follow(_ courier: Courier) {
        self.courier = courier
        openError = nil
        follower.set(
            Task { @MainActor [weak self, weak courier] in
                // Each round ends at a gap (then another round) or at the stream's end: a gap needs
                // the reader 10,000 events behind, so rounds are few; bounded by cancellation.
                while !Task.isCancelled, let round = courier {
                    let asked = round.wallDate()
                    let (pending, events) = await round.pendingMessagesAndEvents()
                    guard self?.change({ $0.load(pending, asked: asked) }) != nil else { return }
                    var gap = false
                    for await event in events {
                        let now = round.wallDate()
                        guard self?.change({ $0.apply(event, now: now) }) != nil else { return }
                        if case .missedEvents = event {
                            gap = true
                            break  // the stream goes with this loop, and so does its subscription
                        }
                    }
                    guard gap else { return }  // the courier closed
                }
            })
    }

    /// Opens a courier with `open` and follows it; once open it does nothing, and while an
    /// open is under way it waits for that one (so `send` may follow `await open(…)`). A
    /// failure is kept in `openError`, for the screen to show; call again to retry.
    func open(with open: @escaping @Sendable () async throws(CourierError) -> Courier) async {
        if let opening {
            await opening.value
            return
        }
        guard courier == nil else { return }
        let opening = Task { @MainActor in
            do throws(CourierError) {
                follow(try await open())
            } catch {
                openError = error
            }
        }
        self.opening = opening
        await opening.value
        self.opening = nil
    }

    /// Sends `json` as `Courier.send` does, and lists the message at once, with its URL (and
    /// body, if kept): what both models' `send` does.
    func sendListing(
        _ json: [String: Any], to url: URL, orderingKey: String?, headers: [String: String], tags: Set<String>,
        replacing: String?, expiry: Duration?
    ) throws(CourierError) -> MessageID {
        guard let courier else { throw CourierError(.closed, "the outbox is not open yet (the model's `open`)") }
        let body = try JSONBody.serialize(json)
        let id = try courier.enqueue(
            body: body, contentType: "application/json", url: url,
            labels: Courier.Labels(
                orderingKey: orderingKey, headers: headers, tags: tags, replacing: replacing, expiry: expiry),
            callbacks: Callbacks())
        change { $0.didSend(id, url: url, body: Data(body), at: courier.wallDate()) }
        return id
    }
}

/// Holds a model's following task; cancels it when the model goes away (a model's `deinit` is
/// not on the main actor, and a `Task` is `Sendable`).
final class FollowerTask: Sendable {
    private let task = Locked<Task<Void, Never>?>(nil)
    func set(_ newValue: Task<Void, Never>) {
        task.withLock {
            $0?.cancel()  // a model follows one courier at a time
            $0 = newValue
        }
    }
    deinit { task.withLock { $0 }?.cancel() }
}

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
    /// Follows `courier` from now on: its pending messages, then every event.
    func follow(_ courier: Courier) {
        self.courier = courier
        openError = nil
        follower.set(
            ModelFollower.follow(courier) { [weak self] body in
                self?.change(body) != nil  // false once the model is gone
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
        _ json: [String: Any], to url: URL, orderingKey: String?, headers: [String: String], tags: Set<String>
    ) throws(CourierError) -> MessageID {
        guard let courier else { throw CourierError(.closed, "the outbox is not open yet (the model's `open`)") }
        let body = try JSONBody.serialize(json)
        let id = try courier.enqueue(
            body: body, contentType: "application/json", url: url,
            labels: Courier.Labels(orderingKey: orderingKey, headers: headers, tags: tags), callbacks: Callbacks())
        change { $0.didSend(id, url: url, body: Data(body), at: courier.wallDate()) }
        return id
    }
}

/// How the models follow a courier: the pending messages and a stream from that instant on
/// (`pendingMessagesAndEvents()`), every event applied on the main actor; after a gap
/// (`.missedEvents`) the state is read again with a new stream, so the model is never silently
/// stale. It ends when the courier closes or the model goes away.
enum ModelFollower {
    /// Starts following `courier`; `apply` runs one change on the model's board, on the main
    /// actor, and returns false once its model is gone.
    static func follow(
        _ courier: Courier,
        apply: @escaping @MainActor ((inout MessageBoard) -> MessageBoard.Change) -> Bool
    ) -> Task<Void, Never> {
        Task { @MainActor [weak courier] in
            // Each round ends at a gap (then another round) or at the stream's end: a gap needs
            // the reader 10,000 events behind, so rounds are few; bounded by cancellation.
            while !Task.isCancelled, let round = courier {
                let asked = round.wallDate()
                let (pending, events) = await round.pendingMessagesAndEvents()
                guard apply({ $0.load(pending, asked: asked) }) else { return }
                var gap = false
                for await event in events {
                    let now = round.wallDate()
                    guard apply({ $0.apply(event, now: now) }) else { return }
                    if case .missedEvents = event {
                        gap = true
                        break  // the stream goes with this loop, and so does its subscription
                    }
                }
                guard gap else { return }  // the courier closed
            }
        }
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

import CourierLog
import Foundation

/// How `CourierModel` and `CourierObservableObject` follow a courier: the pending messages and
/// a stream from that instant on (`pendingMessagesAndEvents()`), every event applied on the
/// main actor; after a gap (`.missedEvents`) the state is read again with a new stream, so the
/// model is never silently stale. It ends when the courier closes or the model goes away.
enum ModelFollower {
    /// One change to a model's board, made on the main actor.
    enum Update: Sendable {
        /// The courier's pending messages, as they were at `asked`.
        case load([PendingMessage], asked: Date)
        case event(CourierEvent, now: Date)
    }

    /// Starts following `courier`; `apply` returns false once its model is gone.
    static func follow(
        _ courier: Courier, bufferCapacity: Int, apply: @escaping @MainActor (Update) -> Bool
    ) -> Task<Void, Never> {
        Task { @MainActor [weak courier] in
            // Each round ends at a gap (then another round) or at the stream's end: a gap needs
            // the reader 10,000 events behind, so rounds are few; bounded by cancellation.
            while !Task.isCancelled, let round = courier {
                let asked = round.wallDate()
                let (pending, events) = await round.pendingMessagesAndEvents(bufferCapacity: bufferCapacity)
                guard apply(.load(pending, asked: asked)) else { return }
                var gap = false
                for await event in events {
                    guard apply(.event(event, now: round.wallDate())) else { return }
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
    func set(_ newValue: Task<Void, Never>) { task.withLock { $0 = newValue } }
    deinit { task.withLock { $0 }?.cancel() }
}

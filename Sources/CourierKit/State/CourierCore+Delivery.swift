import CourierLog
import Foundation

extension CourierCore {
    /// Message `id`'s full state if it is among the recently sent (no file work).
    func recentState(_ id: MessageID) -> MessageState? { read { $0.recentState(of: id) } }

    /// Reads message `id`'s full state back from the log (one positioned read, checksum
    /// verified), with the attempt count and due time the projection holds. Nil if the message
    /// is no longer pending. Blocking file work: never call it on the cooperative pool.
    func loadState(_ id: MessageID) throws(LogError) -> MessageState? {
        // A compaction may move the record between the lookup and the read (`.notFound`): look
        // again. It moves a record at most once per compaction, so three tries are plenty.
        var lastError = LogError(.notFound, "message \(id) kept moving")
        for _ in 0..<3 {
            guard let slot = read({ $0.projection.slot(of: id) }) else { return nil }
            var message: MessageState
            switch Result(catching: { () throws(LogError) in try log.readState(at: slot.address, of: id) }) {
            case .success(let read): message = read.state
            case .failure(let error) where error.code == .notFound:
                lastError = error
                continue
            case .failure(let error): throw error
            }
            message.attempts = slot.attempts
            message.nextDueMilliseconds = slot.dueMilliseconds
            return message
        }
        throw lastError
    }
}

extension Event {
    /// The full state an `enqueued` or `snapshot` event carries.
    var fullState: MessageState? {
        switch self {
        case .enqueued(let s), .snapshot(let s): s
        default: nil
        }
    }
}

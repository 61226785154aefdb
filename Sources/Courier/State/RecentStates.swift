/// The full states of the most recently sent messages, in a ring: most messages are delivered
/// moments after `send`, so their first attempt finds them here instead of reading them back
/// from the log (a thread hop and a positioned read each, a visible share of delivery
/// throughput: <doc:MeasuredFigures>). The record on disk stays the truth; this is only a shortcut.
///
/// Cheap on the send path by design: an insert overwrites one ring entry (no hashing, no
/// eviction bookkeeping); a lookup, once per attempt, scans the ring from the newest entry. A
/// dictionary here cost a measurable share of `send`.
struct RecentStates {
    /// Bodies larger than this are not kept (the ring holds at most capacity × this).
    static let maximumBodyBytes = 2048
    private var ring: [MessageState?]
    private var next = 0

    init(capacity: Int) { ring = Array(repeating: nil, count: max(1, capacity)) }

    /// The state of `id` if it is still in the ring (entries of resolved messages may linger:
    /// callers look up only messages the projection still holds).
    subscript(id: MessageID) -> MessageState? {
        var i = next
        // Newest first: a message is usually attempted right after it was sent.
        for _ in 0..<ring.count {
            i = (i == 0 ? ring.count : i) - 1
            if let state = ring[i], state.id == id { return state }
        }
        return nil
    }

    mutating func insert(_ state: MessageState) {
        guard state.body.count <= Self.maximumBodyBytes else { return }
        ring[next] = state
        next = (next + 1) % ring.count
    }
}

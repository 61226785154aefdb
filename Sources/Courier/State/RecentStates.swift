/// The full states of recently sent messages, so that an attempt finds its message here
/// instead of reading it back from the log (a thread hop and a positioned read each, a visible
/// share of delivery throughput: <doc:MeasuredFigures>). The record on disk stays the truth;
/// this is only a shortcut.
///
/// A ring indexed by the message's arrival order in the projection (`Projection.Slot.order`,
/// which `send` assigns in the same critical section as the insert): an insert overwrites one
/// entry, a lookup reads one, no hashing and no scan. An entry is valid only if its id matches
/// (a later message may have taken the place). A message resolved is dropped at once, so the
/// ring holds pending messages only: a backlog of up to `capacity` is attempted without a read.
struct RecentStates {
    /// Bodies larger than this are not kept: the ring's bodies never exceed capacity × this
    /// (4 MiB at the default capacity), and only while those messages are pending.
    static let maximumBodyBytes = 1024
    private var ring: [MessageState?]

    init(capacity: Int) { ring = Array(repeating: nil, count: max(1, capacity)) }

    private func index(_ order: UInt64) -> Int { Int(order % UInt64(ring.count)) }

    /// The state of message `id`, whose slot has arrival order `order`, if the ring holds it.
    subscript(id: MessageID, order order: UInt64) -> MessageState? {
        guard let state = ring[index(order)], state.id == id else { return nil }
        return state
    }

    mutating func insert(_ state: MessageState, order: UInt64) {
        guard state.body.count <= Self.maximumBodyBytes else { return }
        ring[index(order)] = state
    }

    /// Message `id` is resolved: its entry goes (if it is still there).
    mutating func remove(_ id: MessageID, order: UInt64) {
        if ring[index(order)]?.id == id { ring[index(order)] = nil }
    }
}

/// The full states of the most recently sent messages, bounded by bytes: most messages are
/// delivered moments after `send`, so their first attempt finds them here instead of reading
/// them back from the log (a thread hop and a positioned read each, which measured ~10% of
/// delivery throughput on loopback). A message leaves when it resolves or is pushed out by
/// newer ones; its record on disk stays the truth.
struct RecentStates {
    /// The most body bytes kept (the default keeps ~1,500 messages of ~150 bytes).
    let limitBytes: Int
    private var states: [MessageID: MessageState] = [:]
    private var order: [MessageID] = []
    private var head = 0
    private var bytes = 0

    init(limitBytes: Int) { self.limitBytes = max(0, limitBytes) }

    subscript(id: MessageID) -> MessageState? { states[id] }

    mutating func insert(_ state: MessageState) {
        let size = Self.size(of: state)
        guard size <= limitBytes, states.updateValue(state, forKey: state.id) == nil else { return }
        order.append(state.id)
        bytes += size
        // Evicts oldest first; each turn removes one: bounded by the entries kept.
        while bytes > limitBytes, head < order.count {
            if let old = states.removeValue(forKey: order[head]) { bytes -= Self.size(of: old) }
            head += 1
        }
        if head > 256 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    mutating func remove(_ id: MessageID) {
        if let old = states.removeValue(forKey: id) { bytes -= Self.size(of: old) }
    }

    private static func size(of state: MessageState) -> Int {
        state.body.count + state.url.utf8.count + 96
    }
}

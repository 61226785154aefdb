/// How a message's life ended.
enum Resolution: Equatable {
    case delivered
    case abandoned(String)
    case cancelled
}

/// The most recent resolutions, for `delivered(_:)` on messages already done. Bounded: the
/// oldest are forgotten first.
struct ResolvedMemory {
    let limit: Int
    private var map: [MessageID: Resolution] = [:]
    private var order: [MessageID] = []
    private var head = 0

    init(limit: Int) { self.limit = max(0, limit) }

    subscript(id: MessageID) -> Resolution? { map[id] }

    mutating func record(_ id: MessageID, _ resolution: Resolution) {
        guard limit > 0 else { return }
        if map.updateValue(resolution, forKey: id) == nil { order.append(id) }
        // Evict one per insert past the limit: bounded work per call.
        if order.count - head > limit {
            map[order[head]] = nil
            head += 1
        }
        if head > 1024 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}

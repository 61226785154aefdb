/// Ordering lanes: messages with the same ordering key queue in one lane, in arrival order,
/// and only a lane's head may be attempted. A lane's key is the message's `orderingKey`, or,
/// in `.fifoPerDestination` mode, its URL for messages without one (the two are kept apart by
/// a tag byte). Lanes are reference-counted: an index is reused once its lane is empty.
struct LaneTable {
    static let none = UInt32.max

    private struct Lane {
        var key: [UInt8]
        var queue = SlotQueue()
        var members = 0
    }

    private var lanes: [Lane?] = []
    private var indexByKey: [[UInt8]: UInt32] = [:]
    private var freeIndices: [UInt32] = []

    var count: Int { indexByKey.count }

    /// The lane for `key` (tag byte first), created if new; the slot joins its queue.
    mutating func join(_ slot: UInt32, key: [UInt8]) -> UInt32 {
        let index: UInt32
        if let known = indexByKey[key] {
            index = known
        } else if let reused = freeIndices.popLast() {
            index = reused
            lanes[Int(index)] = Lane(key: key)
            indexByKey[key] = index
        } else {
            precondition(lanes.count < Int(Self.none), "more ordering lanes than an index holds")
            index = UInt32(lanes.count)
            lanes.append(Lane(key: key))
            indexByKey[key] = index
        }
        lanes[Int(index)]!.queue.append(slot)
        lanes[Int(index)]!.members += 1
        return index
    }

    /// The slot leaves its lane; the lane is freed when empty.
    mutating func leave(_ slot: UInt32, lane index: UInt32) {
        lanes[Int(index)]!.queue.remove(slot)
        lanes[Int(index)]!.members -= 1
        guard lanes[Int(index)]!.members == 0 else { return }
        indexByKey[lanes[Int(index)]!.key] = nil
        lanes[Int(index)] = nil
        freeIndices.append(index)
    }

    func head(of index: UInt32) -> UInt32? { lanes[Int(index)]?.queue.first }

    /// The lane key of a message: its ordering key (tag 1), else its URL when every
    /// destination is one lane (tag 0), else none.
    static func key(orderingKey: UnsafeRawBufferPointer?, url: UnsafeRawBufferPointer, fifoPerDestination: Bool) -> [UInt8]? {
        if let orderingKey { return [1] + orderingKey }
        return fifoPerDestination ? [0] + url : nil
    }
}

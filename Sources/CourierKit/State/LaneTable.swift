/// Ordering lanes: messages with the same ordering key queue in one lane, in arrival order,
/// and only a lane's head may be attempted. A lane's key is the message's `orderingKey`, or,
/// in `.fifoPerDestination` mode, its URL's index in the `URLTable` for messages
/// without one (already interned: no bytes copied or hashed per message). Lanes are
/// reference-counted: an index is reused once its lane is empty. (A URL index is reused only
/// once no message goes there, so its lane is empty by then too.)
struct LaneTable {
    static let none = UInt32.max

    enum Key: Hashable {
        case ordering([UInt8])
        case url(UInt32)
    }

    private struct Lane {
        var key: Key
        var queue = SlotQueue()
        var members = 0
    }

    private var lanes: [Lane?] = []
    private var indexByKey: [Key: UInt32] = [:]
    private var freeIndices: [UInt32] = []

    var count: Int { indexByKey.count }

    /// The lane for `key`, created if new; the slot joins its queue.
    mutating func join(_ slot: UInt32, key: Key) -> UInt32 {
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

    /// The lane key of a message: its ordering key, else its URL when every destination is one
    /// lane, else none.
    static func key(orderingKey: UnsafeRawBufferPointer?, url: UInt32, fifoPerDestination: Bool) -> Key? {
        if let orderingKey { return .ordering(Array(orderingKey)) }
        return fifoPerDestination ? .url(url) : nil
    }
}

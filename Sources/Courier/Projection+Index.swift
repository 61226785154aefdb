import CourierLog

/// The id index and the due-time heap of `Projection`: both hold 4-byte slot indices only.
extension Projection {
    // MARK: Id index (open addressing, linear probing, backward-shift deletion)

    private static func hash(_ id: MessageID) -> Int {
        let (hi, lo) = withUnsafeBytes(of: id.uuid) { ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
        // Both halves: ids from a generator that varies only one half still spread.
        let mixed = (lo ^ (hi << 32 | hi >> 32)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> 17)
    }

    func lookup(_ id: MessageID) -> UInt32? {
        guard !idTable.isEmpty else { return nil }
        let mask = idTable.count - 1
        var p = Self.hash(id) & mask
        // At most half the table is full, so an empty entry ends every probe.
        while true {
            let entry = idTable[p]
            if entry == 0 { return nil }
            if slots[Int(entry - 1)].id == id { return entry - 1 }
            p = (p + 1) & mask
        }
    }

    /// Indexes slot `i`, already live and counted.
    mutating func insertIntoIndex(_ i: UInt32) {
        if count * 2 > idTable.count {
            growIndex()  // re-indexes every live slot, `i` included
            return
        }
        let mask = idTable.count - 1
        var p = Self.hash(slots[Int(i)].id) & mask
        while idTable[p] != 0 { p = (p + 1) & mask }
        idTable[p] = i + 1
    }

    mutating func removeFromIndex(_ id: MessageID) {
        guard !idTable.isEmpty else { return }
        let mask = idTable.count - 1
        var p = Self.hash(id) & mask
        while idTable[p] != 0, slots[Int(idTable[p] - 1)].id != id { p = (p + 1) & mask }
        guard idTable[p] != 0 else { return }
        // Backward shift: move later entries of the cluster into the hole when their home
        // position allows, so no tombstones accumulate.
        var hole = p
        var q = (p + 1) & mask
        while idTable[q] != 0 {
            let home = Self.hash(slots[Int(idTable[q] - 1)].id) & mask
            // Movable when `home` is not cyclically within (hole, q].
            let distanceFromHome = (q - home) & mask
            let distanceFromHole = (q - hole) & mask
            if distanceFromHome >= distanceFromHole {
                idTable[hole] = idTable[q]
                hole = q
            }
            q = (q + 1) & mask
        }
        idTable[hole] = 0
    }

    private mutating func growIndex() {
        let size = max(64, idTable.count * 2)
        idTable = [UInt32](repeating: 0, count: size)
        let mask = size - 1
        for i in slots.indices where slots[i].flags.contains(.live) {
            var p = Self.hash(slots[i].id) & mask
            while idTable[p] != 0 { p = (p + 1) & mask }
            idTable[p] = UInt32(i) + 1
        }
    }

    // MARK: Heap by (due, order)

    private func precedes(_ a: UInt32, _ b: UInt32) -> Bool {
        let x = slots[Int(a)], y = slots[Int(b)]
        return (x.dueMilliseconds, x.order) < (y.dueMilliseconds, y.order)
    }

    mutating func heapPush(_ i: UInt32) {
        assert(slots[Int(i)].heapIndex == Self.notInHeap)
        heap.append(i)
        slots[Int(i)].heapIndex = UInt32(heap.count - 1)
        siftUp(heap.count - 1)
    }

    mutating func heapRemove(_ i: UInt32) {
        let position = Int(slots[Int(i)].heapIndex)
        assert(position < heap.count && heap[position] == i)
        let last = heap.removeLast()
        slots[Int(i)].heapIndex = Self.notInHeap
        guard position < heap.count else { return }
        heap[position] = last
        slots[Int(last)].heapIndex = UInt32(position)
        siftDown(siftUp(position))
    }

    /// The slot's key changed: restore the heap order around it.
    mutating func heapFix(_ i: UInt32) {
        siftDown(siftUp(Int(slots[Int(i)].heapIndex)))
    }

    /// Rebuilds the heap from every schedulable slot (after bulk changes of due times).
    mutating func heapify() {
        for i in heap { slots[Int(i)].heapIndex = Self.notInHeap }
        heap.removeAll(keepingCapacity: true)
        for i in slots.indices where slots[i].flags == .live {
            if fifoPerDestination && destinations.head(of: slots[i].destination) != UInt32(i) { continue }
            heap.append(UInt32(i))
            slots[i].heapIndex = UInt32(heap.count - 1)
        }
        var p = heap.count / 2
        while p > 0 {
            p -= 1
            siftDown(p)
        }
    }

    @discardableResult
    private mutating func siftUp(_ start: Int) -> Int {
        var c = start
        while c > 0 {
            let parent = (c - 1) / 2
            guard precedes(heap[c], heap[parent]) else { break }
            swapHeap(c, parent)
            c = parent
        }
        return c
    }

    private mutating func siftDown(_ start: Int) {
        var c = start
        while true {
            let l = 2 * c + 1, r = l + 1
            var m = c
            if l < heap.count && precedes(heap[l], heap[m]) { m = l }
            if r < heap.count && precedes(heap[r], heap[m]) { m = r }
            if m == c { return }
            swapHeap(c, m)
            c = m
        }
    }

    private mutating func swapHeap(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        slots[Int(heap[a])].heapIndex = UInt32(a)
        slots[Int(heap[b])].heapIndex = UInt32(b)
    }

    #if DEBUG
    /// Checks every invariant (tests call it after each step).
    func checkInvariants() -> Bool {
        var live = 0
        for (i, slot) in slots.enumerated() where slot.flags.contains(.live) {
            live += 1
            guard lookup(slot.id) == UInt32(i) else { return false }
            let schedulable = !slot.flags.contains(.inFlight) && (!fifoPerDestination || destinations.head(of: slot.destination) == UInt32(i))
            guard schedulable == (slot.heapIndex != Self.notInHeap) else { return false }
        }
        for (p, i) in heap.enumerated() {
            guard slots[Int(i)].heapIndex == UInt32(p) else { return false }
            if p > 0 && precedes(i, heap[(p - 1) / 2]) { return false }
        }
        return live == count
    }
    #endif
}

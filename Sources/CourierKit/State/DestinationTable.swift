import Foundation

/// The distinct URLs of pending messages, each stored once and referenced by a 4-byte index
/// from every slot that goes there, with reference counts (an index is reused once no message
/// goes there). Each URL also names its origin (for backoff per destination); ordering lives
/// in `LaneTable`.
struct DestinationTable {
    struct Entry {
        var url: [UInt8]
        var references: Int
        /// Index into the projection's `OriginTable` (scheme, host and port).
        var origin: UInt32
    }

    private var entries: [Entry?] = []
    private var indexByURL: [[UInt8]: UInt32] = [:]
    private var freeIndices: [UInt32] = []
    /// The last URL interned: consecutive messages mostly share one, and comparing bytes
    /// avoids building an array (and hashing it) per message on the replay path.
    private var lastInterned: UInt32?

    var count: Int { indexByURL.count }

    func url(_ index: UInt32) -> String { String(decoding: entries[Int(index)]!.url, as: UTF8.self) }

    func origin(_ index: UInt32) -> UInt32 { entries[Int(index)]!.origin }

    /// The index of `url`, adding it if new (and its origin to `origins`); counts one more
    /// reference.
    mutating func intern(_ url: UnsafeRawBufferPointer, origins: inout OriginTable) -> UInt32 {
        if let last = lastInterned, entries[Int(last)]!.url.withUnsafeBytes({ Self.same($0, url) }) {
            entries[Int(last)]!.references += 1
            return last
        }
        let key = [UInt8](url)
        let index: UInt32
        if let known = indexByURL[key] {
            index = known
            entries[Int(index)]!.references += 1
        } else if let reused = freeIndices.popLast() {
            index = reused
            entries[Int(index)] = Entry(
                url: key, references: 1, origin: origins.intern(url: String(decoding: key, as: UTF8.self)))
            indexByURL[key] = index
        } else {
            index = UInt32(entries.count)
            entries.append(
                Entry(url: key, references: 1, origin: origins.intern(url: String(decoding: key, as: UTF8.self))))
            indexByURL[key] = index
        }
        lastInterned = index
        return index
    }

    private static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }

    /// One reference fewer; the entry is freed at zero.
    mutating func release(_ index: UInt32) {
        entries[Int(index)]!.references -= 1
        guard entries[Int(index)]!.references == 0 else { return }
        indexByURL[entries[Int(index)]!.url] = nil
        entries[Int(index)] = nil
        freeIndices.append(index)
        if lastInterned == index { lastInterned = nil }
    }

}

/// A FIFO of slot indices with O(1) amortised append and removal from the front.
struct SlotQueue {
    private var items: [UInt32] = []
    private var head = 0
    var first: UInt32? { head < items.count ? items[head] : nil }
    var isEmpty: Bool { head >= items.count }

    mutating func append(_ slot: UInt32) { items.append(slot) }

    /// The first slot, from the head, for which `isLive` holds (stale entries are skipped,
    /// not removed): no copy, no mutation.
    func first(where isLive: (UInt32) -> Bool) -> UInt32? { items[head...].first(where: isLive) }

    /// Every slot from the head, oldest first (stale entries included: callers check them).
    var entries: ArraySlice<UInt32> { items[head...] }

    /// Removes and returns the head.
    mutating func popFirst() -> UInt32? {
        guard let slot = first else { return nil }
        remove(slot)
        return slot
    }

    /// Removes `slot`; usually the head (messages resolve in order), else a linear search.
    mutating func remove(_ slot: UInt32) {
        if first == slot {
            head += 1
        } else if let i = items[head...].firstIndex(of: slot) {
            items.remove(at: i)
        }
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}

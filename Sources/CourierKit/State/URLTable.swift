import Foundation

/// The distinct URLs of pending messages, each stored once and referenced by a 4-byte index
/// from every slot that goes there, with reference counts (an index is reused once no message
/// goes there). Each URL's bytes are interned with its origin's index in the projection's
/// `OriginTable` (scheme, host and port), for backoff per destination; ordering lives in
/// `LaneTable`.
typealias URLTable = InternTable<[UInt8], UInt32>

extension URLTable {
    func url(_ index: UInt32) -> String { String(decoding: key(index), as: UTF8.self) }

    func origin(_ index: UInt32) -> UInt32 { self[index] }

    /// The index of `url`, adding it if new (and its origin to `origins`); counts one more
    /// reference. Keyed by its UTF-8 bytes, not the `String`: `String`'s `==` is canonical
    /// equivalence, under which two URLs spelled with different bytes (NFC and NFD) are one.
    mutating func intern(_ url: String, origins: inout OriginTable) -> UInt32 {
        intern(Array(url.utf8)) { origins.intern(url: url) }
    }
}

/// Keys interned to 4-byte indices (`URLTable`'s URLs, `LaneTable`'s lanes), each with a value
/// and a count of references: an index is reused once its last reference is released.
struct InternTable<Key: Hashable, Value> {
    private var entries: [(key: Key, value: Value, references: Int)?] = []
    private(set) var indexByKey: [Key: UInt32] = [:]
    private var freeIndices: [UInt32] = []

    func key(_ index: UInt32) -> Key { entries[Int(index)]!.key }

    /// Whether `index` holds an entry (it was not freed).
    func isLive(_ index: UInt32) -> Bool { entries[Int(index)] != nil }

    /// A live index's value, changed in place (a lane's queue is not copied).
    subscript(_ index: UInt32) -> Value {
        get { entries[Int(index)]!.value }
        _modify { yield &entries[Int(index)]!.value }
    }

    /// The index of `key`, with one more reference; a new one gets the value `make` makes.
    mutating func intern(_ key: Key, _ make: () -> Value) -> UInt32 {
        if let known = indexByKey[key] {
            entries[Int(known)]!.references += 1
            return known
        }
        let index = freeIndices.popLast() ?? UInt32(entries.count)
        let entry = (key: key, value: make(), references: 1)
        if Int(index) == entries.count { entries.append(entry) } else { entries[Int(index)] = entry }
        indexByKey[key] = index
        return index
    }

    /// One reference fewer; at the last, the entry is freed, its index reusable.
    mutating func release(_ index: UInt32) {
        entries[Int(index)]!.references -= 1
        guard entries[Int(index)]!.references == 0 else { return }
        indexByKey[entries[Int(index)]!.key] = nil
        entries[Int(index)] = nil
        freeIndices.append(index)
    }
}

/// A FIFO (of slot indices, of resolved ids, of a subscriber's events) with O(1) amortised
/// append and removal from the front.
struct FIFOQueue<Element: Equatable> {
    private var items: [Element] = []
    private var head = 0
    var first: Element? { head < items.count ? items[head] : nil }

    mutating func append(_ element: Element) { items.append(element) }

    /// Every element from the head, oldest first (stale entries included: callers check them).
    var entries: ArraySlice<Element> { items[head...] }

    /// Removes and returns the head.
    mutating func popFirst() -> Element? {
        guard let element = first else { return nil }
        head += 1
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Removes `element`; usually the head (messages resolve in order), else a linear search.
    mutating func remove(_ element: Element) {
        if first == element {
            _ = popFirst()
        } else if let i = items[head...].firstIndex(of: element) {
            items.remove(at: i)
        }
    }
}

extension FIFOQueue: Sendable where Element: Sendable {}

/// The destinations (origins: scheme, host and port) that messages go to, each with its
/// `Governor` and the queue of its *parked* messages: due, but kept back by an outage (until a
/// probe is answered) or *throttled* by the limit or pace (until a delivery ends or the pace
/// allows).
/// One entry per origin, never freed (a few hundred bytes each).
struct OriginTable {
    struct Entry {
        /// "https://host:443": how events name it.
        var name: String
        var governor: Governor
        /// Oldest first. Entries may be stale (a slot unparked or freed since): `parkedCount` is
        /// the exact number, and every pop re-checks the slot's flags.
        var parked = FIFOQueue<UInt32>()
        var parkedCount = 0
        /// `DestinationOptions.batching`, if it batches.
        var batching: Batching?
    }

    private(set) var entries: [Entry] = []
    private var indexByName: [String: UInt32] = [:]
    /// Origins with an outage, in the order they went down (`Projection.observe` keeps it), so
    /// scheduling never scans every origin. Few at any time.
    var down: [UInt32] = []
    /// Throttled origins: up, and may have parked slots. May hold origins with none left; the
    /// selection drops them. Few at any time.
    var throttled: [UInt32] = []
    var rules = Governor.Rules()
    /// `Configuration.batchingByOrigin`.
    var batching: [String: Batching] = [:]

    /// The index of the origin `url` belongs to, adding it if new. Called when the URL table adds
    /// `url` (no message pending went there), not for each message to a URL already pending.
    mutating func intern(url: String) -> UInt32 {
        let name = Self.origin(of: url)
        if let known = indexByName[name] { return known }
        entries.append(Entry(name: name, governor: Governor(rules), batching: batching[name]))
        indexByName[name] = UInt32(entries.count - 1)
        return UInt32(entries.count - 1)
    }

    /// The URL of origin `o`'s name (`origin(of:)`): what events carry.
    func url(_ o: UInt32) -> URL {
        URL(string: entries[Int(o)].name) ?? URL(fileURLWithPath: "/")  // a name made from a valid URL parses
    }

    /// "scheme://host:port", lowercased, with the scheme's default port made explicit, so
    /// `https://A.example/x` and `https://a.example:443/y` are one destination.
    static func origin(of url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased()
        else { return url }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }

    subscript(_ origin: UInt32) -> Entry {
        get { entries[Int(origin)] }
        // In place: with a setter alone, `origins[o].parked.append(i)` would copy the entry,
        // and with it the parked queue (the array's second owner), on every park: a backlog
        // parked behind its destination's limit cost O(n) per message.
        _modify { yield &entries[Int(origin)] }
    }

    func isDown(_ origin: UInt32) -> Bool { entries[Int(origin)].governor.isDown }

    /// The earliest time a probe or a throttled message may start: over origins that are down
    /// with something parked, and throttled origins (up, with parked slots) whose pace (not limit)
    /// holds them back.
    var earliestStart: UInt64? {
        // Bounded by the few origins down or throttled (no array is made: every plan asks).
        func earliest(_ origins: [UInt32]) -> UInt64? {
            origins.lazy.compactMap { o -> UInt64? in
                let entry = self.entries[Int(o)]
                return entry.parkedCount > 0 ? entry.governor.earliestStart(notBefore: 0) : nil
            }.min()
        }
        let (a, b) = (earliest(down), earliest(throttled))
        return a.map { min($0, b ?? $0) } ?? b
    }

    /// Pulls every pending probe time after `limit` back to `limit`.
    mutating func probeNoLaterThan(_ limit: UInt64) {
        for o in down { entries[Int(o)].governor.probeNoLaterThan(limit) }
    }
}

/// Ordering lanes: messages with the same ordering key queue in one lane, in arrival order,
/// and only a lane's head may be attempted. A lane's key is the message's `orderingKey`, or,
/// in `.fifoPerDestination` mode, its URL's index in the `URLTable` for messages
/// without one (already interned: no bytes copied or hashed per message). Lanes are
/// reference-counted: an index is reused once its lane is empty. (A URL index is reused only
/// once no message goes there, so its lane is empty by then too.)
struct LaneTable {
    static let none = UInt32.max

    enum Key: Hashable {
        /// The key's UTF-8 bytes (as `URLTable`'s URLs): keys equal only as `String`s (NFC and
        /// NFD spellings) stay two lanes.
        case ordering([UInt8])
        case url(UInt32)
    }

    /// Each lane's slots, oldest first. An index is below `none`: a lane has a slot, and the
    /// projection holds fewer slots than `UInt32.max - 1`.
    private var lanes = InternTable<Key, FIFOQueue<UInt32>>()

    /// The lane for `key`, created if new; the slot joins its queue.
    mutating func join(_ slot: UInt32, key: Key) -> UInt32 {
        let index = lanes.intern(key) { FIFOQueue() }
        lanes[index].append(slot)
        return index
    }

    /// The slot leaves its lane; the lane is freed when empty.
    mutating func leave(_ slot: UInt32, lane index: UInt32) {
        lanes[index].remove(slot)
        lanes.release(index)
    }

    func head(of index: UInt32) -> UInt32? { lanes.isLive(index) ? lanes[index].first : nil }

    /// The lane key of a message: its ordering key, else its URL when every destination is one
    /// lane, else none.
    static func key(orderingKey: String?, url: UInt32, fifoPerDestination: Bool) -> Key? {
        if let orderingKey { return .ordering(Array(orderingKey.utf8)) }
        return fifoPerDestination ? .url(url) : nil
    }
}

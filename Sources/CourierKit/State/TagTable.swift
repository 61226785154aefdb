/// The app's tags on pending messages (`send(…tags:)`) and the tags it holds (`hold(tagged:)`).
///
/// Only tagged messages have an entry, so an app that never tags pays one empty dictionary.
/// Keyed by slot index, as the projection's other side tables: `Projection.remove` clears a
/// slot's entry before the index is reused. The held set is the log's: every `held` record
/// not followed by a `released` one for its tag (the compactor re-appends it, see
/// `CourierCore.compact`).
struct TagTable {
    /// Each tagged pending message's tags, sorted.
    private(set) var tagsBySlot: [UInt32: [String]] = [:]
    /// The pending messages carrying each tag.
    private var slotsByTag: [String: Set<UInt32>] = [:]
    /// Tags held now.
    private(set) var held: Set<String> = []

    /// Slot `i` now holds a message with `tags` (none: nothing is kept).
    mutating func add(_ tags: [String], slot i: UInt32) {
        guard !tags.isEmpty else { return }
        assert(tagsBySlot[i] == nil, "a slot's tags are cleared when it is freed")
        tagsBySlot[i] = tags
        for tag in tags { slotsByTag[tag, default: []].insert(i) }
    }

    /// Slot `i`'s message left the projection.
    mutating func remove(slot i: UInt32) {
        guard let tags = tagsBySlot.removeValue(forKey: i) else { return }
        for tag in tags {
            slotsByTag[tag]?.remove(i)
            if slotsByTag[tag]?.isEmpty == true { slotsByTag[tag] = nil }
        }
    }

    /// The slots of the pending messages tagged `tag`, in no order.
    func slots(tagged tag: String) -> Set<UInt32> { slotsByTag[tag] ?? [] }

    /// Whether any of slot `i`'s tags is held.
    func isHeld(slot i: UInt32) -> Bool {
        guard !held.isEmpty, let tags = tagsBySlot[i] else { return false }
        return tags.contains { held.contains($0) }
    }

    /// Whether a message with `tags` would be held now.
    func isHeld(_ tags: [String]) -> Bool { !held.isEmpty && tags.contains { held.contains($0) } }

    /// Holds `tag`; false if it was held already.
    mutating func hold(_ tag: String) -> Bool { held.insert(tag).inserted }

    /// Releases `tag`; false if it was not held.
    mutating func release(_ tag: String) -> Bool { held.remove(tag) != nil }
}

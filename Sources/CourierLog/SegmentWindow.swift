#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A sliding view of one segment, read in chunks: the scanner never holds a whole segment
/// (a segment may be 1 GiB; memory stays near one chunk plus the largest record or batch in
/// reach). Offsets are segment offsets.
///
/// `bytes(at:count:)` returns a pointer valid until the next call; it reads more, and drops
/// bytes before `keepFrom`, as needed.
final class SegmentWindow {
    /// Reads up to `count` bytes at `offset` (fewer only at the end of the segment).
    typealias Source = (_ offset: Int, _ count: Int) throws(LogError) -> [UInt8]

    /// Bytes read per refill, at least.
    static let chunkBytes = 1 << 20

    private let source: Source
    /// The segment's size when the scan began (a segment being appended to may grow: bytes
    /// after this are not looked at; and it may shrink: a short read ends it early).
    private(set) var size: Int
    /// Bytes [base, base + count) of the segment, at the start of `storage`.
    private var storage = UnsafeMutableRawBufferPointer.allocate(byteCount: 0, alignment: 8)
    private var count = 0
    private var base = 0
    /// Bytes before this offset are no longer needed (the scanner moves it forward).
    var keepFrom = 0

    init(size: Int, source: @escaping Source) {
        self.size = size
        self.source = source
    }

    deinit { storage.deallocate() }

    /// A window over bytes already in memory (tests, the fuzz target).
    convenience init(bytes: [UInt8]) {
        self.init(size: bytes.count) { offset, count in Array(bytes[offset..<min(bytes.count, offset + count)]) }
    }

    /// The `count` bytes at `offset`, or nil if the segment ends before them.
    func bytes(at offset: Int, count: Int) throws(LogError) -> UnsafeRawBufferPointer? {
        precondition(offset >= keepFrom && count >= 0)
        guard offset + count <= size else { return nil }
        if offset < base || offset + count > base + self.count { try refill(through: offset + count) }
        guard offset >= base, offset + count <= base + self.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: storage[(offset - base)..<(offset - base + count)])
    }

    /// One byte, or nil past the end.
    func byte(at offset: Int) throws(LogError) -> UInt8? { try bytes(at: offset, count: 1)?.first }

    /// Whether every byte from `offset` to the end is zero: read chunk by chunk straight from
    /// the source, so the window does not grow to hold the rest of the segment.
    func isZero(from offset: Int) throws(LogError) -> Bool {
        var p = offset
        // Each turn covers one chunk, or ends: bounded by size / chunk.
        while p < size {
            let chunk = try source(p, min(Self.chunkBytes, size - p))
            if chunk.isEmpty { return true }
            if !chunk.allSatisfy({ $0 == 0 }) { return false }
            p += chunk.count
        }
        return true
    }

    /// Keeps [keepFrom, base + count) and reads on until `end` (and a chunk beyond it).
    private func refill(through end: Int) throws(LogError) {
        let start = min(keepFrom, end)
        let keptCount = start >= base && start < base + count ? base + count - start : 0
        let have = start + keptCount
        let want = min(size, max(end, have + Self.chunkBytes))
        let more = try source(have, want - have)
        if more.count < want - have { size = have + more.count }  // shrank since listed
        let needed = keptCount + more.count
        if needed > storage.count {
            let bigger = UnsafeMutableRawBufferPointer.allocate(byteCount: max(needed, 2 * storage.count), alignment: 8)
            if keptCount > 0 { bigger.baseAddress!.copyMemory(from: storage.baseAddress! + (start - base), byteCount: keptCount) }
            storage.deallocate()
            storage = bigger
        } else if keptCount > 0 && start != base {
            memmove(storage.baseAddress!, storage.baseAddress! + (start - base), keptCount)  // regions may overlap
        }
        if !more.isEmpty {
            more.withUnsafeBytes { storage.baseAddress!.advanced(by: keptCount).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        base = start
        count = needed
    }
}

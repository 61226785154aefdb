/// A sliding view of one segment, read in chunks: the scanner never holds a whole segment
/// (a segment may be 1 GiB; memory stays near one chunk plus the largest record or batch in
/// reach). Offsets are segment offsets.
///
/// `bytes(at:count:)` returns a pointer valid until the next call; it reads more, and drops
/// bytes before `keepFrom`, as needed.
final class SegmentWindow {
    /// Reads bytes at `offset` into the buffer; returns how many (fewer only at the end).
    typealias Source = (_ offset: Int, _ into: UnsafeMutableRawBufferPointer) throws(LogError) -> Int

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
        let chunk = UnsafeMutableRawBufferPointer.allocate(
            byteCount: min(Self.chunkBytes, max(1, size - offset)), alignment: 8)
        defer { chunk.deallocate() }
        while p < size {
            let n = try source(p, UnsafeMutableRawBufferPointer(rebasing: chunk[..<min(chunk.count, size - p)]))
            if n == 0 { return true }
            if !UnsafeRawBufferPointer(rebasing: chunk[..<n]).allSatisfy({ $0 == 0 }) { return false }
            p += n
        }
        return true
    }

    /// Keeps [keepFrom, base + count) and reads on until `end` (and a chunk beyond it),
    /// straight into the window's storage.
    private func refill(through end: Int) throws(LogError) {
        let start = min(keepFrom, end)
        let keptCount = start >= base && start < base + count ? base + count - start : 0
        let have = start + keptCount
        let want = min(size, max(end, have + Self.chunkBytes))
        let needed = keptCount + (want - have)
        if needed > storage.count {
            let bigger = UnsafeMutableRawBufferPointer.allocate(byteCount: max(needed, 2 * storage.count), alignment: 8)
            if keptCount > 0 {
                bigger.baseAddress!.copyMemory(from: storage.baseAddress! + (start - base), byteCount: keptCount)
            }
            storage.deallocate()
            storage = bigger
        } else if keptCount > 0 && start != base {
            // The regions may overlap: `copyMemory` is a `memmove`.
            storage.baseAddress!.copyMemory(from: storage.baseAddress! + (start - base), byteCount: keptCount)
        }
        let read = try source(have, UnsafeMutableRawBufferPointer(rebasing: storage[keptCount..<needed]))
        if read < want - have { size = have + read }  // shrank since listed
        base = start
        count = keptCount + read
    }
}

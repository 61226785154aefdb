#if canImport(CLZ4)
import CLZ4

/// liblz4's block API (`LZ4_compress_fast_extState`, `LZ4_decompress_safe`), with one state
/// buffer for the codec's life. Acceleration 1, as liblz4's frame API uses at level 0, so
/// frames come out byte-identical to `LZ4F_compressFrame`'s (tested).
///
/// It costs more per record than LZ4F (figures: Courier's "Measured figures" article,
/// `wal-bench`), because `extState` clears its 16 KB state on every call; LZ4F uses
/// `LZ4_compress_fast_extState_fastReset`, which Debian's liblz4 does not export. The stable
/// alternative, `LZ4_resetStream_fast` + `LZ4_compress_fast_continue`, is as fast as LZ4F
/// but picks other matches: most frames came out different. Kept: the
/// same bytes as before (the golden logs still match), for ~6% of an append.
final class LibLZ4BlockCodec: LZ4BlockCodec {
    private let state: UnsafeMutableRawPointer

    init() {
        state = .allocate(byteCount: Int(LZ4_sizeofState()), alignment: 16)
    }

    deinit { state.deallocate() }

    func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int {
        guard source.count > 0, destination.count > 0,
            let src = source.baseAddress, let dst = destination.baseAddress
        else { return 0 }
        let n = LZ4_compress_fast_extState(
            state, src.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count), 1)
        return Int(max(0, n))
    }

    func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard let src = source.baseAddress, let dst = destination.baseAddress, source.count > 0 else { return nil }
        let n = LZ4_decompress_safe(
            src.assumingMemoryBound(to: CChar.self), dst.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count))
        return n < 0 ? nil : Int(n)
    }
}
#endif

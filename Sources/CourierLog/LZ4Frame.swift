#if canImport(CLZ4)
import CLZ4
#endif

/// The LZ4 frame format (lz4_Frame_format.md), written and parsed in Swift over a platform
/// `LZ4BlockCodec`. The writer makes exactly the frames liblz4's `LZ4F_compressFrame` made
/// with the log's preferences (tested byte for byte), so logs written before and after read
/// the same, and `lz4 -dc` still decodes a segment:
///
///     magic 0x184D2204 (4) · FLG (1) · BD (1) · [content size, u64] · HC (1)
///     blocks: u32 size (bit 31: stored raw) + data, each ≤ 64 KiB of content
///     end mark u32 0 · content checksum u32 (XXH32 of the body, seed 0)
///
/// FLG = version 01, independent blocks, content checksum, and content size when the body is
/// not empty (liblz4 omits a zero size, reading 0 as "unknown"); BD = 64 KiB blocks;
/// HC = second byte of XXH32(FLG…content size). A block is stored raw when compressing it
/// does not make it smaller (as `LZ4F_makeBlock` does).
enum LZ4Frame {
    static let magic: UInt32 = 0x184D_2204
    static let blockBytes = 65_536
    static let flagVersion: UInt8 = 0x40
    static let flagIndependentBlocks: UInt8 = 0x20
    static let flagBlockChecksum: UInt8 = 0x10
    static let flagContentSize: UInt8 = 0x08
    static let flagContentChecksum: UInt8 = 0x04
    static let blockMaximum64KiB: UInt8 = 0x40
    static let rawBlockBit: UInt32 = 0x8000_0000
}

/// Writes one frame per body. Not thread-safe: the writer owns one under its lock. `package`
/// for `wal-bench`.
package final class LZ4Encoder {
    private let codec = LZ4BlockCodec()
    /// One block's compression target, reused (a fresh buffer per block would cost an
    /// allocation each).
    private let block = UnsafeMutableRawBufferPointer.allocate(byteCount: LZ4Frame.blockBytes, alignment: 16)

    package init() {}

    deinit { block.deallocate() }

    /// Appends one LZ4 frame holding `body` to `out`; returns the frame's length.
    package func compress(_ body: UnsafeRawBufferPointer, appendingTo out: inout [UInt8]) -> Int {
        let start = out.count
        out.appendLE(LZ4Frame.magic)
        let descriptorStart = out.count
        var flags = LZ4Frame.flagVersion | LZ4Frame.flagIndependentBlocks | LZ4Frame.flagContentChecksum
        if body.count > 0 { flags |= LZ4Frame.flagContentSize }
        out.append(flags)
        out.append(LZ4Frame.blockMaximum64KiB)
        if body.count > 0 { out.appendLE(UInt64(body.count)) }
        let headerChecksum = out.withUnsafeBytes {
            XXH32.digest(UnsafeRawBufferPointer(rebasing: $0[descriptorStart...]))
        }
        out.append(UInt8(truncatingIfNeeded: headerChecksum >> 8))
        var offset = 0
        // Each turn consumes one block of the body: bounded by body.count / 64 KiB + 1.
        while offset < body.count {
            let chunk = UnsafeRawBufferPointer(rebasing: body[offset..<min(body.count, offset + LZ4Frame.blockBytes)])
            // Compressed only if strictly smaller: the target holds at most count - 1 bytes.
            let n = codec.compress(chunk, into: UnsafeMutableRawBufferPointer(rebasing: block[0..<(chunk.count - 1)]))
            if n > 0 && n < chunk.count {
                out.appendLE(UInt32(n))
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: block[0..<n]))
            } else {
                out.appendLE(UInt32(chunk.count) | LZ4Frame.rawBlockBit)
                out.append(contentsOf: chunk)
            }
            offset += chunk.count
        }
        out.appendLE(UInt32(0))
        out.appendLE(XXH32.digest(body))
        return out.count - start
    }
}

/// Reads frames the log wrote. Not thread-safe: each reader owns one. `package` for
/// `wal-bench` and the libFuzzer target `fuzz-lz4-frame`.
package final class LZ4Decoder {
    private let codec = LZ4BlockCodec()

    package init() {}

    /// Decodes exactly one whole frame that fills `frame`, or returns nil. Frames whose content
    /// is larger than `limit`, that the writer never makes (linked blocks, a dictionary id),
    /// with a wrong checksum, or with trailing bytes are rejected; nothing is allocated before
    /// the declared size passed `limit`.
    package func decompress(_ frame: UnsafeRawBufferPointer, limit: Int) -> [UInt8]? {
        guard let header = Self.header(frame), header.contentSize <= UInt64(limit) else { return nil }
        var body = [UInt8](repeating: 0, count: Int(header.contentSize))
        let produced = body.withUnsafeMutableBytes {
            decodeBlocks(frame, from: header.blocksOffset, flags: header.flags, into: $0)
        }
        // Every frame `header` accepts has a content checksum: its last four bytes.
        let stored = frame.loadLE(UInt32.self, at: frame.count - 4)
        guard produced == body.count, XXH32.digest(body) == stored else { return nil }
        return body
    }

    /// Parses and verifies the frame header. A frame without a content size must be empty
    /// (the writer omits the size only then).
    static func header(_ frame: UnsafeRawBufferPointer) -> (flags: UInt8, contentSize: UInt64, blocksOffset: Int)? {
        guard frame.count >= Format.minimumBodyFrameSize, frame.loadLE(UInt32.self, at: 0) == LZ4Frame.magic else {
            return nil
        }
        let flags = frame[4]
        let required = LZ4Frame.flagVersion | LZ4Frame.flagIndependentBlocks | LZ4Frame.flagContentChecksum
        // Version 01, independent blocks, content checksum; reserved bit and dictionary id clear.
        guard flags & 0xC0 == LZ4Frame.flagVersion, flags & required == required, flags & 0x03 == 0 else { return nil }
        let blockID = (frame[5] >> 4) & 0x07
        guard frame[5] & 0x8F == 0, blockID == 4 else { return nil }  // the writer's 64 KiB blocks
        var offset = 6
        var contentSize: UInt64 = 0
        if flags & LZ4Frame.flagContentSize != 0 {
            guard frame.count >= offset + 8 + 1 + 8 else { return nil }
            contentSize = frame.loadLE(UInt64.self, at: offset)
            offset += 8
        }
        let checksum = XXH32.digest(UnsafeRawBufferPointer(rebasing: frame[4..<offset]))
        guard frame[offset] == UInt8(truncatingIfNeeded: checksum >> 8) else { return nil }
        return (flags, contentSize, offset + 1)
    }

    /// Decodes the blocks starting at `offset` into `raw`; returns the bytes produced, or nil
    /// if a block is malformed, too big, or the frame does not end exactly with its end mark
    /// and content checksum.
    private func decodeBlocks(
        _ frame: UnsafeRawBufferPointer, from offset: Int, flags: UInt8,
        into raw: UnsafeMutableRawBufferPointer
    ) -> Int? {
        let blockChecksum = flags & LZ4Frame.flagBlockChecksum != 0 ? 4 : 0
        var pos = offset
        var produced = 0
        // Each turn consumes at least 4 bytes of `frame`: bounded by frame.count / 4.
        for _ in 0...(frame.count / 4) {
            guard pos + 4 <= frame.count else { return nil }
            let word = frame.loadLE(UInt32.self, at: pos)
            pos += 4
            if word == 0 { return pos + 4 == frame.count ? produced : nil }  // end mark, then the content checksum
            let length = Int(word & ~LZ4Frame.rawBlockBit)
            guard length <= LZ4Frame.blockBytes, pos + length + blockChecksum <= frame.count else { return nil }
            let data = UnsafeRawBufferPointer(rebasing: frame[pos..<(pos + length)])
            let room = min(LZ4Frame.blockBytes, raw.count - produced)
            if word & LZ4Frame.rawBlockBit != 0 {
                guard length <= room else { return nil }
                UnsafeMutableRawBufferPointer(rebasing: raw[produced..<(produced + length)]).copyMemory(from: data)
                produced += length
            } else {
                guard room > 0,
                    let n = codec.decompress(
                        data, into: UnsafeMutableRawBufferPointer(rebasing: raw[produced..<(produced + room)])),
                    n <= room
                else { return nil }
                produced += n
            }
            if blockChecksum > 0 {
                guard frame.loadLE(UInt32.self, at: pos + length) == XXH32.digest(data) else { return nil }
            }
            pos += length + blockChecksum
        }
        return nil
    }
}

/// LZ4 *block* compression: the one piece of LZ4 that comes from a platform library. Everything
/// around blocks (the frame: descriptor, XXH32 checksums, block sizes, end mark) is written and
/// parsed in Swift by `LZ4Encoder`/`LZ4Decoder`, identically on every platform.
///
/// - Linux: the system liblz4's stable block API (`LibLZ4BlockCodec`, below).
/// - Apple platforms: the Compression framework's `COMPRESSION_LZ4_RAW`, the same raw block
///   format (`LZ4BlockCodec+Compression.swift`, compiled only there).
///
/// Each has the same two methods. `compress(_:into:)` returns the compressed size, or 0 when
/// the result would not fit in `destination` (the frame then stores the block uncompressed);
/// `decompress(_:into:)` returns the decompressed size, or nil when the block is malformed or
/// would not fit. They keep their working memory for their whole life; they are not
/// thread-safe (the writer owns one under its lock, each reader its own).
#if canImport(CLZ4)
typealias LZ4BlockCodec = LibLZ4BlockCodec
#elseif canImport(Compression)
typealias LZ4BlockCodec = CompressionBlockCodec
#else
#error("no LZ4 block codec for this platform: Linux needs liblz4 (apt-get install liblz4-dev)")
#endif

#if canImport(CLZ4)
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
final class LibLZ4BlockCodec {
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

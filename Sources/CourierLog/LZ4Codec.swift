import CLZ4

/// One LZ4 frame per record body, through liblz4's stable frame API with contexts that live as
/// long as the codec (creating a context per record would cost more than the compression).
/// Not thread-safe: the writer owns one under its lock, each reader its own.
final class LZ4Encoder {
    private let context: OpaquePointer
    private var preferences = LZ4F_preferences_t()

    init() {
        var ctx: OpaquePointer?
        let rc = LZ4F_createCompressionContext(&ctx, UInt32(LZ4F_VERSION))
        // Only fails on allocation failure; nothing sensible to do but stop.
        precondition(LZ4F_isError(rc) == 0 && ctx != nil, "LZ4F_createCompressionContext failed")
        context = ctx!
        preferences.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
        preferences.frameInfo.blockMode = LZ4F_blockIndependent
        preferences.autoFlush = 1
    }

    deinit {
        LZ4F_freeCompressionContext(context)
        buffer.deallocate()
    }

    /// Compression target, reused and grown as needed (a fresh buffer per record would cost
    /// an allocation plus zero-filling the worst-case bound).
    private var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)

    /// Appends one LZ4 frame holding `body` to `out`; returns the frame's length.
    func compress(_ body: UnsafeRawBufferPointer, appendingTo out: inout [UInt8]) -> Int {
        preferences.frameInfo.contentSize = UInt64(body.count)
        let bound = LZ4F_compressFrameBound(body.count, &preferences)
        if buffer.count < bound {
            buffer.deallocate()
            buffer = .allocate(byteCount: bound, alignment: 16)
        }
        let dst = buffer.baseAddress!
        var n = LZ4F_compressBegin(context, dst, bound, &preferences)
        checked(n)
        var total = n
        n = LZ4F_compressUpdate(context, dst + total, bound - total, body.baseAddress, body.count, nil)
        checked(n)
        total += n
        n = LZ4F_compressEnd(context, dst + total, bound - total, nil)
        checked(n)
        total += n
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<total]))
        return total
    }

    private func checked(_ rc: Int) {
        // The destination is sized by LZ4F_compressFrameBound, so an error is a liblz4 bug.
        precondition(LZ4F_isError(rc) == 0, "LZ4F compression failed: \(String(cString: LZ4F_getErrorName(rc)))")
    }
}

final class LZ4Decoder {
    private let context: OpaquePointer

    init() {
        var ctx: OpaquePointer?
        let rc = LZ4F_createDecompressionContext(&ctx, UInt32(LZ4F_VERSION))
        precondition(LZ4F_isError(rc) == 0 && ctx != nil, "LZ4F_createDecompressionContext failed")
        context = ctx!
    }

    deinit { LZ4F_freeDecompressionContext(context) }

    /// Decodes exactly one whole frame that fills `frame`, or returns nil. Frames larger than
    /// `limit`, or with trailing bytes, are rejected: the writer never makes them.
    func decompress(_ frame: UnsafeRawBufferPointer, limit: Int) -> [UInt8]? {
        guard let size = Self.contentSize(frame), size <= UInt64(limit) else { return nil }
        let count = Int(size)
        var consumedTotal = 0
        var producedTotal = 0
        var complete = false
        let out = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            // Each call makes progress or fails; a frame of `count` bytes needs at most one call
            // per 64 KiB block plus the header and end, so this bound is generous.
            let maxCalls = 4 + count / 65_536 + frame.count / 65_536
            for _ in 0..<maxCalls {
                var dstSize = count - producedTotal
                var srcSize = frame.count - consumedTotal
                let hint = LZ4F_decompress(
                    context, buffer.baseAddress.map { $0 + producedTotal }, &dstSize,
                    frame.baseAddress! + consumedTotal, &srcSize, nil)
                if LZ4F_isError(hint) != 0 { consumedTotal = -1; break }
                producedTotal += dstSize
                consumedTotal += srcSize
                if hint == 0 { complete = true; break }
                if dstSize == 0 && srcSize == 0 { consumedTotal = -1; break }
            }
            initialized = producedTotal
        }
        guard complete, consumedTotal == frame.count, producedTotal == count else {
            LZ4F_resetDecompressionContext(context)
            return nil
        }
        return out
    }

    /// The content size from the frame descriptor. liblz4 writes no size field for an empty
    /// body (it reads 0 as "unknown"), so a frame without one must decode to nothing.
    static func contentSize(_ frame: UnsafeRawBufferPointer) -> UInt64? {
        guard frame.count >= Format.minimumBodyFrameSize,
              frame.loadLE(UInt32.self, at: 0) == Format.lz4FrameMagic else { return nil }
        let flg = frame[4]
        guard flg >> 6 == 1 else { return nil }
        guard flg & 0x08 != 0 else { return 0 }
        guard frame.count >= 14 else { return nil }
        return frame.loadLE(UInt64.self, at: 6)
    }
}

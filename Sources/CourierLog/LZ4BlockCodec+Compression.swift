#if !canImport(CLZ4) && canImport(Compression)
import Compression

/// Apple's Compression framework, `COMPRESSION_LZ4_RAW`: the standard LZ4 block format with no
/// framing of Apple's own. Type-checked for iOS by `make ios-check`, never run here (no Apple
/// machine): kept to these few calls, each checked against Apple's documentation. Its compressed bytes may
/// differ from liblz4's (another match finder) but decode the same everywhere.
final class CompressionBlockCodec {
    private let encodeScratch: UnsafeMutableRawPointer
    private let decodeScratch: UnsafeMutableRawPointer

    init() {
        encodeScratch = .allocate(
            byteCount: max(1, compression_encode_scratch_buffer_size(COMPRESSION_LZ4_RAW)), alignment: 16)
        decodeScratch = .allocate(
            byteCount: max(1, compression_decode_scratch_buffer_size(COMPRESSION_LZ4_RAW)), alignment: 16)
    }

    deinit {
        encodeScratch.deallocate()
        decodeScratch.deallocate()
    }

    func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int {
        guard source.count > 0, destination.count > 0,
            let src = source.baseAddress, let dst = destination.baseAddress
        else { return 0 }
        // Returns 0 when the output does not fit: the frame then stores the block raw.
        return compression_encode_buffer(
            dst.assumingMemoryBound(to: UInt8.self), destination.count,
            src.assumingMemoryBound(to: UInt8.self), source.count,
            encodeScratch, COMPRESSION_LZ4_RAW)
    }

    func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard source.count > 0, let src = source.baseAddress, let dst = destination.baseAddress else { return nil }
        let n = compression_decode_buffer(
            dst.assumingMemoryBound(to: UInt8.self), destination.count,
            src.assumingMemoryBound(to: UInt8.self), source.count,
            decodeScratch, COMPRESSION_LZ4_RAW)
        // 0 is failure (a block never decodes to nothing); the frame decoder checks that the
        // block's output adds up to the declared content size, so a truncated decode is caught.
        return n == 0 ? nil : n
    }
}
#endif

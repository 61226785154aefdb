/// LZ4 *block* compression: the one piece of LZ4 that comes from a platform library. Everything
/// around blocks (the frame: descriptor, XXH32 checksums, block sizes, end mark) is written and
/// parsed in Swift by `LZ4FrameEncoder`/`LZ4FrameDecoder`, identically on every platform.
///
/// - Linux: the system liblz4's stable block API (`LZ4BlockCodec+LibLZ4.swift`).
/// - Apple platforms: the Compression framework's `COMPRESSION_LZ4_RAW`, the same raw block
///   format (`LZ4BlockCodec+Compression.swift`, compiled only there).
///
/// Implementations keep their working memory for their whole life; they are not thread-safe
/// (the writer owns one under its lock, each reader its own).
protocol LZ4BlockCodec: AnyObject {
    /// Compresses `source` into `destination`. Returns the compressed size, or 0 when the
    /// result would not fit in `destination` (the frame then stores the block uncompressed).
    func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int
    /// Decompresses one block into `destination`. Returns the decompressed size, or nil when
    /// the block is malformed or would not fit.
    func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int?
}

/// The platform's block codec.
func makePlatformBlockCodec() -> any LZ4BlockCodec {
    #if canImport(CLZ4)
    return LibLZ4BlockCodec()
    #elseif canImport(Compression)
    return CompressionBlockCodec()
    #else
    #error("no LZ4 block codec for this platform: Linux needs liblz4 (apt-get install liblz4-dev)")
    #endif
}

/// The LZ4 frame codec for the libFuzzer target `fuzz-lz4-frame` and for `wal-bench` (`package`:
/// the package's tools only, no API of the product).
package final class LZ4FrameCodec {
    private let encoder = LZ4Encoder()
    private let decoder = LZ4Decoder()

    /// A codec with the platform's block codec.
    package init() {}

    /// Appends one frame holding `body` to `out`; returns its length.
    @discardableResult
    package func encode(_ body: UnsafeRawBufferPointer, appendingTo out: inout [UInt8]) -> Int {
        encoder.compress(body, appendingTo: &out)
    }

    /// The body of the one frame that fills `frame`, or nil.
    package func decode(_ frame: UnsafeRawBufferPointer, limit: Int) -> [UInt8]? {
        decoder.decompress(frame, limit: limit)
    }

    /// The fuzzing property: decoding `bytes` never crashes and what decodes round-trips; the
    /// bytes scanned as a segment's records never crash or loop. Traps (a libFuzzer crash) on
    /// any broken property.
    package static func fuzz(_ bytes: UnsafeRawBufferPointer) {
        let codec = LZ4FrameCodec()
        if let body = codec.decode(bytes, limit: 1 << 20) {
            var frame: [UInt8] = []
            body.withUnsafeBytes { _ = codec.encode($0, appendingTo: &frame) }
            let again = frame.withUnsafeBytes { codec.decode($0, limit: 1 << 20) }
            precondition(again == body, "a decoded body does not round-trip")
        }
        var segment = SegmentHeader(salt: 0x5EED, firstSequence: 1, createdMilliseconds: 0).encoded()
        segment.append(contentsOf: bytes)
        // In memory the scan cannot fail; a throw would be a bug.
        let result = try! SegmentScanner().scan(SegmentWindow(bytes: segment), segment: "fuzz", after: nil) { _ in }
        precondition((result.trailing?.offset ?? result.size) <= segment.count)
    }
}

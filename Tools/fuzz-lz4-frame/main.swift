// fuzz-lz4-frame: libFuzzer target for the LZ4 frame parser and the segment scanner.
//
//     make fuzz                      (swift build --sanitize fuzzer, then runs it for FUZZ_SECONDS)
//     .build-fuzz/debug/fuzz-lz4-frame crash-…   (replays one input)
//
// Each input is tried as one LZ4 frame (decode must return nil or a body whose re-encoding
// decodes to the same body) and as the record area of a segment (the scanner must not crash
// or loop). Work per input is bounded by the input's size.
import CourierLog
import CourierLogTesting

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let decoder = LZ4Decoder()
    if let body = decoder.decompress(bytes, limit: 1 << 20) {
        var frame: [UInt8] = []
        body.withUnsafeBytes { _ = LZ4Encoder().compress($0, appendingTo: &frame) }
        let again = frame.withUnsafeBytes { decoder.decompress($0, limit: 1 << 20) }
        precondition(again == body, "a decoded body does not round-trip")
    }
    // The same bytes after a valid segment header, read back as the log's reader reads a
    // segment (in windows, through the file system), here from memory.
    let segment = SegmentHeader(salt: 0x5EED, firstSequence: 1, createdMilliseconds: 0).encoded() + Array(bytes)
    let fs = SimulatedFileSystem()
    fs.setContents(segment, of: "/fuzz/" + SegmentName.make(firstSequence: 1))
    // In memory the read cannot fail; a throw would be a bug.
    let report = try! LogReader(directory: "/fuzz", fileSystem: fs).read { _ in }
    precondition((report.tornTail?.offset ?? report.segments[0].bytes) <= segment.count)
    return 0
}

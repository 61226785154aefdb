// fuzz-lz4-frame: libFuzzer target for the LZ4 frame parser and the segment scanner.
//
//     make fuzz                      (swift build --sanitize fuzzer, then runs it for FUZZ_SECONDS)
//     .build-fuzz/debug/fuzz-lz4-frame crash-…   (replays one input)
//
// Each input is tried as one LZ4 frame (decode must return nil or a body whose re-encoding
// decodes to the same body) and as the record area of a segment (the scanner must not crash
// or loop). Work per input is bounded by the input's size.
import CourierLog

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    LZ4Decoder.fuzz(bytes)
    return 0
}

// fuzz-courier: libFuzzer target for what reads bytes from outside in the messaging layer.
//
//     make fuzz                      (swift build --sanitize fuzzer, then runs it for FUZZ_SECONDS)
//     .build-fuzz/debug/fuzz-courier crash-…   (replays one input)
//
// The first byte of an input picks what the rest is fed to:
//   0 … 0x7F   an event body, of the record kind in the second byte (decode, round-trip, replay
//              agrees with the decoder);
//   0x80 … 0xBF  a program building a nested JSON value for `send`'s writer (no trap, no stack
//              overflow: bytes Foundation parses, or `.invalidJSON`);
//   0xC0 … 0xFF  a segment file for `wal-dump` (records, stats and verify, in JSON and text,
//              on a simulated file system: an exit status, never a crash).
// Work per input is bounded by the input's size.
import CourierLog
import CourierLogTesting
import WALDumpCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    guard let selector = bytes.first else { return 0 }
    let rest = UnsafeRawBufferPointer(rebasing: bytes[1...])
    switch selector {
    case 0..<0x80:
        guard let kind = rest.first else { return 0 }
        FuzzEntryPoints.decodeEvent(kind: kind, body: UnsafeRawBufferPointer(rebasing: rest[1...]))
    case 0x80..<0xC0:
        FuzzEntryPoints.serializeJSON(program: rest)
    default:
        dumpSegment(Array(rest))
    }
    return 0
}

/// `wal-dump` on one segment holding `bytes`: every command, both output forms.
func dumpSegment(_ bytes: [UInt8]) {
    let fs = SimulatedFileSystem()
    try! fs.createDirectory(atPath: "/log")
    fs.setContents(bytes, of: "/log/0000000000000001.wal")
    let dump = Dump(directory: "/log", fileSystem: fs, out: { _ in }, err: { _ in })
    for json in [false, true] {
        _ = dump.records(json: json, payload: true)
        _ = dump.stats(json: json)
    }
    _ = dump.verify()
}

@testable import CourierLog
import CourierLogTesting
import Foundation
import Testing
#if canImport(CLZ4)
import CLZ4
#endif

/// The Swift LZ4 frame code against liblz4's frame API, both ways, and against the stock
/// `lz4` tool: the on-disk bytes did not change when the frame moved from liblz4 to Swift.
@Suite struct LZ4FrameTests {
    /// Bodies that cover the frame's cases: empty, tiny (stored raw), one block, exactly one
    /// block, several blocks, incompressible, compressible.
    static func bodies() -> [(String, [UInt8])] {
        var rng = SeededRandom(seed: 99)
        func random(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        func text(_ n: Int) -> [UInt8] {
            Array(String(repeating: #"{"text":"hello world","n":12345}"#, count: n / 30 + 1).utf8.prefix(n))
        }
        return [
            ("empty", []), ("1 byte", [7]), ("12 bytes", text(12)), ("158-byte JSON", text(158)),
            ("4 KiB random", random(4096)), ("64 KiB - 1 text", text(65_535)), ("64 KiB text", text(65_536)),
            ("64 KiB + 1 text", text(65_537)), ("200 KB text", text(200_000)), ("150 KB random", random(150_000)),
            ("mixed 130 KB", text(70_000) + random(60_000)),
        ]
    }

    func encode(_ body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        _ = body.withUnsafeBytes { LZ4Encoder().compress($0, appendingTo: &out) }
        return out
    }

    func decode(_ frame: [UInt8], limit: Int = Format.maximumBodyBytes) -> [UInt8]? {
        frame.withUnsafeBytes { LZ4Decoder().decompress($0, limit: limit) }
    }

    @Test func xxh32MatchesTheSpecificationsVectors() {
        #expect(XXH32.digest([]) == 0x02CC_5D05)
        #expect(XXH32.digest([], seed: 0x9E37_79B1) == 0x36B7_8AE7)
    }

    @Test func everyBodyRoundTrips() {
        for (name, body) in Self.bodies() {
            let frame = encode(body)
            #expect(decode(frame) == body, "\(name)")
            #expect(decode(frame, limit: max(0, body.count - 1)) == (body.isEmpty ? [] : nil),
                    "\(name): the limit is enforced")
        }
    }

    /// Every byte of a frame flipped, and every truncation: never a crash, never a wrong body.
    @Test func damagedFramesAreRejected() {
        for (name, body) in Self.bodies() where body.count <= 4096 {
            let frame = encode(body)
            for i in 0..<frame.count {
                var bad = frame
                bad[i] ^= 0x20
                let decoded = decode(bad)
                #expect(decoded == nil || decoded == body, "\(name): byte \(i)")
            }
            for cut in 0..<frame.count { #expect(decode(Array(frame.prefix(cut))) == nil, "\(name): cut at \(cut)") }
            #expect(decode(frame + [0]) == nil, "\(name): trailing byte")
        }
    }

    #if canImport(CLZ4)
    /// What liblz4's frame API makes with the preferences the log always used.
    static func liblz4Frame(_ body: [UInt8]) -> [UInt8] {
        var prefs = LZ4F_preferences_t()
        prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
        prefs.frameInfo.blockMode = LZ4F_blockIndependent
        prefs.frameInfo.contentSize = UInt64(body.count)
        prefs.autoFlush = 1
        var out = [UInt8](repeating: 0, count: LZ4F_compressFrameBound(body.count, &prefs))
        let n = out.withUnsafeMutableBytes { o in
            body.withUnsafeBytes { LZ4F_compressFrame(o.baseAddress, o.count, $0.baseAddress, $0.count, &prefs) }
        }
        precondition(LZ4F_isError(n) == 0)
        return Array(out.prefix(n))
    }

    /// liblz4's own decoder on a frame.
    static func liblz4Decode(_ frame: [UInt8], size: Int) -> [UInt8]? {
        var ctx: OpaquePointer?
        guard LZ4F_isError(LZ4F_createDecompressionContext(&ctx, UInt32(LZ4F_VERSION))) == 0, let ctx else {
            return nil
        }
        defer { LZ4F_freeDecompressionContext(ctx) }
        var out = [UInt8](repeating: 0, count: size + 1)
        var dstSize = out.count
        var srcSize = frame.count
        let hint = out.withUnsafeMutableBytes { o in
            frame.withUnsafeBytes { LZ4F_decompress(ctx, o.baseAddress, &dstSize, $0.baseAddress, &srcSize, nil) }
        }
        guard LZ4F_isError(hint) == 0, hint == 0, srcSize == frame.count else { return nil }
        return Array(out.prefix(dstSize))
    }

    @Test func framesAreByteIdenticalToLiblz4s() {
        for (name, body) in Self.bodies() { #expect(encode(body) == Self.liblz4Frame(body), "\(name)") }
    }

    @Test func liblz4DecodesOurFramesAndWeDecodeItsFrames() {
        for (name, body) in Self.bodies() {
            #expect(Self.liblz4Decode(encode(body), size: body.count) == body, "\(name): LZ4F_decompress")
            #expect(decode(Self.liblz4Frame(body)) == body, "\(name): ours")
        }
    }

    /// The content checksum is the frame's last 4 bytes: liblz4 wrote XXH32 of the body there.
    @Test func xxh32MatchesTheChecksumsLiblz4Wrote() {
        for (name, body) in Self.bodies() {
            let frame = Self.liblz4Frame(body)
            let stored = frame.withUnsafeBytes { $0.loadLE(UInt32.self, at: frame.count - 4) }
            #expect(XXH32.digest(body) == stored, "\(name)")
        }
    }
    #endif

    /// The stock `lz4` tool decodes a segment written by today's writer (skipping the
    /// skippable header frames) to exactly the bodies appended.
    @Test func theLz4ToolDecodesASegment() throws {
        let lz4 = ["/usr/bin/lz4", "/usr/local/bin/lz4", "/opt/homebrew/bin/lz4"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        let tool = try #require(lz4, "the lz4 tool is missing: make test installs it (Debian package lz4)")
        let dir = NSTemporaryDirectory() + "lz4-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = WriteAheadLog.Configuration()
        config.segmentSizeBytes = 4 << 20
        config.syncPolicy = .never
        let log = try WriteAheadLog(directory: dir, configuration: config)
        let bodies = Self.bodies().map(\.1)
        for b in bodies { try log.append(b, kind: .enqueued) }
        try log.close()
        let segment = try #require(log.segmentNames.last)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["-dc", dir + "/" + segment]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let same = Array(output) == bodies.flatMap { $0 }
        #expect(same, "lz4 -dc printed \(output.count) bytes")
    }
}

// wal-bench: the per-record cost of the log, measured side by side in one run.
//
//     swift run -c release wal-bench [N]        (make bench; N defaults to 200000)
//
// Appends N records of ~150-byte JSON under each sync policy, replays them, and measures the
// alternative record layout (many bodies in one LZ4 frame) that the format chose not to use.
import CLZ4
import CourierLog
import Foundation

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 200_000 : 200_000
let words = [
    "hello", "world", "order", "shipped", "payment", "received", "ok", "retry", "later", "courier",
    "message", "delivered", "status", "update", "user", "signed", "in", "cart", "item", "added"
]

/// ~150 bytes of JSON with some entropy (an id and random words), like a real message body.
func makeBody(_ i: Int, _ rng: inout SystemRandomNumberGenerator) -> [UInt8] {
    var text = ""
    while text.utf8.count < 70 { text += words[Int.random(in: 0..<words.count, using: &rng)] + " " }
    let id = String(UInt64.random(in: 0...UInt64.max, using: &rng), radix: 16)
    return Array(#"{"id":"\#(id)","to":"https://api.example.com/v1/inbox","text":"\#(text)","n":\#(i)}"#.utf8)
}

var rng = SystemRandomNumberGenerator()
let bodies = (0..<count).map { makeBody($0, &rng) }
let bodyBytes = bodies.reduce(0) { $0 + $1.count }
let root = NSTemporaryDirectory() + "wal-bench-\(getpid())"
defer { try? FileManager.default.removeItem(atPath: root) }

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

func row(_ name: String, _ n: Int, _ elapsed: Duration, _ extra: String = "") {
    let rate = Double(n) / seconds(elapsed)
    let padded = name.padding(toLength: 46, withPad: " ", startingAt: 0)
    print(padded + String(format: "%10.0f records/s  %7.2f µs/record  ", rate, 1e6 / rate) + extra)
}

/// Appends `n` records (from `threads` threads) under `policy`; returns the directory.
func appendRun(_ name: String, policy: WriteAheadLog.SyncPolicy, n: Int, threads: Int = 1, batch: Int = 1) throws
    -> String
{
    let dir = root + "/" + name.replacingOccurrences(of: " ", with: "-")
    var config = WriteAheadLog.Configuration()
    config.syncPolicy = policy
    let log = try WriteAheadLog(directory: dir, configuration: config)
    let perThread = n / threads
    let clock = ContinuousClock()
    let elapsed = try clock.measure {
        if threads == 1 {
            var i = 0
            while i < n {
                if batch == 1 {
                    try log.append(bodies[i], kind: .enqueued)
                } else {
                    try log.append(batch: (i..<min(n, i + batch)).map { LogEntry(kind: .attempted, body: bodies[$0]) })
                }
                i += batch
            }
        } else {
            // Real threads: concurrentPerform would run only as many as there are cores.
            let group = DispatchGroup()
            for t in 0..<threads {
                group.enter()
                Thread {
                    for i in (t * perThread)..<((t + 1) * perThread) { _ = try? log.append(bodies[i], kind: .enqueued) }
                    group.leave()
                }.start()
            }
            group.wait()
        }
        try log.sync()
    }
    let onDisk = log.sizeBytes
    try log.close()
    row(
        name, perThread * threads, elapsed,
        String(format: "%5.1f bytes/record on disk", Double(onDisk) / Double(perThread * threads)))
    return dir
}

/// The floor for an append that returns after write(2): a bare pwrite of 213 bytes per record.
func barePwrite(n: Int) throws {
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let path = root + "/bare.bin"
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0)
    defer { close(fd) }
    let record = [UInt8](repeating: 0x41, count: 213)
    var offset = 0
    let elapsed = ContinuousClock().measure {
        for _ in 0..<n {
            _ = record.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
            offset += record.count
        }
        fdatasync(fd)
    }
    row("baseline: bare pwrite(213 bytes), no log", n, elapsed)
}

print(
    "wal-bench: \(count) records, mean body \(bodyBytes / count) bytes, "
        + "\(ProcessInfo.processInfo.activeProcessorCount) cores"
)
print("-- append (each returns after write(2); sync as the policy says; a final sync is timed too)")
try barePwrite(n: count)
let defaultDir = try appendRun(
    "append, default .interval(100 ms)", policy: WriteAheadLog.Configuration().syncPolicy, n: count)
_ = try appendRun("append, .never", policy: .never, n: count)
_ = try appendRun(
    "append, batches of 100, .interval(100 ms)", policy: .interval(.milliseconds(100)), n: count, batch: 100)
let alwaysN = min(count, 5_000)
_ = try appendRun("append, .always, 1 thread", policy: .always, n: alwaysN)
_ = try appendRun("append, .always, 8 threads (group commit)", policy: .always, n: alwaysN * 4, threads: 8)

print("-- replay (open + read every record through the reader)")
do {
    let clock = ContinuousClock()
    var replayed = 0
    var replayBytes = 0
    let elapsed = try clock.measure {
        let log = try WriteAheadLog(directory: defaultDir)
        _ = try log.reader.read {
            replayed += 1; replayBytes += $0.body.count
        }
        try log.close()
    }
    precondition(replayed == count && replayBytes == bodyBytes, "replay lost records")
    row("replay, default log", replayed, elapsed)
}

print("-- record layout: one LZ4 frame per record (chosen) vs many bodies per frame")
func frameBytes(_ chunk: [[UInt8]]) -> Int {
    let joined = Array(chunk.joined())
    var prefs = LZ4F_preferences_t()
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
    prefs.frameInfo.contentSize = UInt64(joined.count)
    var out = [UInt8](repeating: 0, count: LZ4F_compressFrameBound(joined.count, &prefs))
    return out.withUnsafeMutableBytes { o in
        joined.withUnsafeBytes { LZ4F_compressFrame(o.baseAddress, o.count, $0.baseAddress, $0.count, &prefs) }
    }
}
for perFrame in [1, 10, 100] {
    let sample = Array(bodies.prefix(10_000))
    var total = 0
    var i = 0
    while i < sample.count {
        total += frameBytes(Array(sample[i..<min(sample.count, i + perFrame)]))
        i += perFrame
    }
    // Each record keeps its 36-byte header either way (it carries seq, kind, CRC).
    let perRecord = Double(total) / Double(sample.count) + Double(Format.recordHeaderSize)
    print(
        String(
            format: "%3d bodies per frame: %6.1f bytes/record on disk (body %d bytes)", perFrame, perRecord,
            bodyBytes / count))
}

print("-- LZ4 frame codec, per ~150-byte record: liblz4's frame API (before) vs Swift frame over the block API (now)")
do {
    let clock = ContinuousClock()
    let n = min(count, 100_000)
    var prefs = LZ4F_preferences_t()
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
    prefs.frameInfo.blockMode = LZ4F_blockIndependent
    prefs.autoFlush = 1
    var cctx: OpaquePointer?
    var dctx: OpaquePointer?
    _ = LZ4F_createCompressionContext(&cctx, UInt32(LZ4F_VERSION))
    _ = LZ4F_createDecompressionContext(&dctx, UInt32(LZ4F_VERSION))
    var scratch = [UInt8](repeating: 0, count: 1 << 16)
    // Both encode into a reused buffer: no allocation inside the timed loops.
    let oldEncode = clock.measure {
        for i in 0..<n {
            prefs.frameInfo.contentSize = UInt64(bodies[i].count)
            _ = scratch.withUnsafeMutableBytes { o in
                bodies[i].withUnsafeBytes { b -> Int in
                    var t = LZ4F_compressBegin(cctx, o.baseAddress, o.count, &prefs)
                    t += LZ4F_compressUpdate(cctx, o.baseAddress! + t, o.count - t, b.baseAddress, b.count, nil)
                    t += LZ4F_compressEnd(cctx, o.baseAddress! + t, o.count - t, nil)
                    return t
                }
            }
        }
    }
    let encoder = LZ4Encoder(), decoder = LZ4Decoder()
    var out: [UInt8] = []
    out.reserveCapacity(1 << 16)
    let newEncode = clock.measure {
        for i in 0..<n {
            out.removeAll(keepingCapacity: true)
            bodies[i].withUnsafeBytes { _ = encoder.compress($0, appendingTo: &out) }
        }
    }
    // Untimed: the frames liblz4 makes, to decode, and whether ours are the same bytes.
    var frames: [[UInt8]] = []
    var identical = 0
    for i in 0..<n {
        prefs.frameInfo.contentSize = UInt64(bodies[i].count)
        let size = scratch.withUnsafeMutableBytes { o in
            bodies[i].withUnsafeBytes { LZ4F_compressFrame(o.baseAddress, o.count, $0.baseAddress, $0.count, &prefs) }
        }
        frames.append(Array(scratch.prefix(size)))
        out.removeAll(keepingCapacity: true)
        bodies[i].withUnsafeBytes { _ = encoder.compress($0, appendingTo: &out) }
        if out == frames[i] { identical += 1 }
    }
    var sink = 0
    let oldDecode = clock.measure {
        for i in 0..<n {
            var dst = scratch.count
            var src = frames[i].count
            _ = scratch.withUnsafeMutableBytes { o in
                frames[i].withUnsafeBytes { LZ4F_decompress(dctx, o.baseAddress, &dst, $0.baseAddress, &src, nil) }
            }
            sink &+= dst
        }
    }
    let newDecode = clock.measure {
        for i in 0..<n { sink &+= frames[i].withUnsafeBytes { decoder.decompress($0, limit: 1 << 20)?.count ?? 0 } }
    }
    LZ4F_freeCompressionContext(cctx)
    LZ4F_freeDecompressionContext(dctx)
    func ns(_ d: Duration) -> Double { seconds(d) / Double(n) * 1e9 }
    print(
        String(
            format: "encode: LZ4F %6.0f ns, Swift frame %6.0f ns (ratio %.2f); %d of %d frames byte-identical",
            ns(oldEncode), ns(newEncode), ns(newEncode) / ns(oldEncode), identical, n))
    print(
        String(
            format: "decode: LZ4F %6.0f ns, Swift frame %6.0f ns (ratio %.2f)", ns(oldDecode), ns(newDecode),
            ns(newDecode) / ns(oldDecode)))
    if sink == 42 { print("") }
}

print("-- components, per ~150-byte record")
do {
    let clock = ContinuousClock()
    let n = min(count, 100_000)
    var sink: UInt32 = 0
    let crc = clock.measure { for i in 0..<n { sink &+= CRC32C.checksum(bodies[i]) } }
    let table = clock.measure { for i in 0..<n { sink &+= bodies[i].withUnsafeBytes { CRC32C.software(0, $0) } } }
    print(
        String(
            format: "CRC32C, in use (hardware: %@): %6.0f ns", CRC32C.usesHardware ? "yes" : "no",
            seconds(crc) / Double(n) * 1e9))
    print(String(format: "CRC32C, Swift slicing-by-8 table: %6.0f ns", seconds(table) / Double(n) * 1e9))
    if sink == 42 { print("") }  // keep the work observable
}

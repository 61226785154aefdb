// courier-bench: Courier's figures, measured side by side in one run (release build).
//
//     swift run -c release courier-bench [SIZES] [DELIVER] [IDLE_SECONDS]      (make bench)
//
// 1. Memory per pending message and open time at each size in SIZES (default
//    10000,100000,1000000), each measured in a fresh child process reopening a directory
//    filled with that many pending messages (~150-byte JSON bodies).
// 2. `send` next to one SQLite row per transaction and a bare write(2) of a record of the same
//    size, in the same run.
// 3. Delivered per second to the loopback flaky server (0% and 50% failures), next to bare
//    URLSession and bare AsyncHTTPClient POSTing the same number of requests 8 wide.
// 4. Idle: CPU and wake-ups of a process with an open courier and nothing due.
// `--outbox N`: ExtensionOutbox.send next to Courier.send (rate, and send to delivered).
// `--batching N`: requests and body bytes per message, per message against batches and gzip.
// `--model [N,...]`: a CourierModel's main-actor CPU per event and heap per message.
#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
#endif
@_spi(CourierTesting) import CourierKit
import CourierLog
import FlakyServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let clock = ContinuousClock()
let arguments = CommandLine.arguments

/// Room for a million pending messages (the default, 256 MiB, holds about 900,000 of these).
func benchConfiguration() -> Courier.Configuration {
    var config = Courier.Configuration()
    config.allowsPurgeableDirectory = true  // a scratch directory, in tmp
    config.transport = Parked()
    config.maximumStorageBytes = 1 << 30
    return config
}

// Child modes: one measurement each, in a process of its own.
if arguments.count == 4 && arguments[1] == "--fill" {
    let courier = try Courier(directory: URL(fileURLWithPath: arguments[2]), configuration: benchConfiguration())
    let count = Int(arguments[3])!
    let before = residentBytes()
    let elapsed = try clock.measure { for i in 0..<count { try courier.send(benchMessage(i), to: target) } }
    print(seconds(elapsed), residentBytes() - before)
    await courier.close()
    exit(0)
}
if arguments.count == 4 && arguments[1] == "--open" {
    var config = benchConfiguration()
    config.isCompactionEnabled = false  // measure the open alone
    let before = residentBytes()
    let start = clock.now
    let courier = try Courier(directory: URL(fileURLWithPath: arguments[2]), configuration: config)
    let elapsed = seconds(start.duration(to: clock.now))
    let grown = residentBytes() - before
    precondition(courier.pendingCount == Int(arguments[3])!, "replay lost messages")
    print(elapsed, grown)
    await courier.close()
    exit(0)
}

if arguments.count == 4 && arguments[1] == "--idle" {
    // Ten pending messages whose next attempt is an hour away: nothing is due.
    var config = benchConfiguration()
    config.retry = RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600))
    config.transport = Refusing()
    let courier = try Courier(directory: URL(fileURLWithPath: arguments[2]), configuration: config)
    for i in 0..<10 { try courier.send(benchMessage(i), to: target) }
    try await Task.sleep(for: .seconds(1))  // the first attempts fail; the next are an hour away
    precondition(courier.pendingCount == 10)
    let before = cpuUsage()
    try await Task.sleep(for: .seconds(Double(arguments[3])!))
    let after = cpuUsage()
    print(after.seconds - before.seconds, after.wakeups - before.wakeups)
    await courier.close()
    exit(0)
}

if arguments.count == 3 && arguments[1] == "--serve" {
    try await serve(failureRate: Double(arguments[2])!)
}
if arguments.count == 3 && arguments[1] == "--soak" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-soak-\(getpid())")
    try await soak(Int(arguments[2])!, directory: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}

if arguments.count == 3 && arguments[1] == "--flaky" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-flaky-\(getpid())")
    try await flakyScenario(Int(arguments[2])!, root: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
#if canImport(AsyncHTTPClient) && canImport(NIOSSL) && canImport(NIOHTTP2)
if arguments.count >= 2 && arguments[1] == "--h2" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-h2-\(getpid())")
    try await http2Benchmark(root: directory, count: arguments.count >= 3 ? Int(arguments[2]) ?? 1000 : 1000)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
#endif
#if canImport(AsyncHTTPClient)
if arguments.count >= 2 && arguments[1] == "--batching" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-batch-\(getpid())")
    try await batchingBenchmark(count: arguments.count >= 3 ? Int(arguments[2]) ?? 1000 : 1000, root: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
#endif
if arguments.count >= 2 && arguments[1] == "--drain" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-drain-\(getpid())")
    let rest = arguments.dropFirst(2)
    let plot = rest.first { $0.hasSuffix(".svg") }.map { URL(fileURLWithPath: $0) }
    try await drainBenchmark(root: directory, only: Set(rest.compactMap { Int($0) }), plot: plot)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if arguments.count >= 2 && arguments[1] == "--outbox" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-outbox-\(getpid())")
    try await outboxBenchmark(count: arguments.count >= 3 ? Int(arguments[2]) ?? 2000 : 2000, root: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if arguments.count >= 2 && arguments[1] == "--model" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-model-\(getpid())")
    let sizes = arguments.count >= 3 ? arguments[2].split(separator: ",").compactMap { Int($0) } : []
    try await modelBenchmark(sizes: sizes.isEmpty ? [1_000, 5_000, 10_000] : sizes, root: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if arguments.count >= 2 && arguments[1] == "--retry-tail" {
    try await retryTailBenchmark(only: Set(arguments.dropFirst(2).compactMap { Int($0) }))
    exit(0)
}
if arguments.count == 3 && arguments[1] == "--outage" {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-outage-\(getpid())")
    try await outageScenarios(seconds: Int(arguments[2])!, root: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}

let sizes =
    arguments.count > 1 ? arguments[1].split(separator: ",").compactMap { Int($0) } : [10_000, 100_000, 1_000_000]
let deliverCount = arguments.count > 2 ? Int(arguments[2]) ?? 4_000 : 4_000
let idleSeconds = arguments.count > 3 ? Double(arguments[3]) ?? 20 : 20
let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-bench-\(getpid())")
try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: root) }

func diskBytes(_ dir: URL) throws -> Int {
    let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".wal") }
    return try names.reduce(0) {
        $0
            + ((try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent($1).path)[.size] as? Int)
                ?? 0)
    }
}

// Profiling aid: `--deliver N RATE courier|ahc|ahc-short-keys` runs one side of the delivery comparison alone
// (e.g. under `perf record`) and prints its seconds.
if let i = arguments.firstIndex(of: "--deliver"), arguments.count >= i + 4 {
    let count = Int(arguments[i + 1])!, rate = Double(arguments[i + 2])!
    let server = try await FlakyServer(behavior: .init(failureRate: rate, seed: 7))
    let url = await server.url
    if arguments[i + 3] == "courier" {
        // An optional segment size makes the run roll segments: the core's lock is then watched
        // (blocking file calls made under it, and with -DCOURIER_LOCK_PROBE, how long it is held).
        if arguments.count > i + 4, let segmentBytes = Int(arguments[i + 4]) {
            let watch = LockWatchingFileSystem()
            #if COURIER_LOCK_PROBE
            CoreLockProbe.install()
            #endif
            var appendsPastSize = 0
            let elapsed = try await courierRun(
                count, to: url, round: "profile", segmentBytes: segmentBytes, fileSystem: watch
            ) { appendsPastSize = $0.appendsPastSegmentSizeForTesting }
            print(elapsed)
            reportCoreLock(watch, appendsPastSegmentSize: appendsPastSize)
        } else {
            print(try await courierRun(count, to: url, round: "profile"))
        }
    } else {
        #if canImport(AsyncHTTPClient)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        // `ahc-short-keys`: the baseline as it was before 2026-11-26, with keys like `ahc-17`.
        let keys = arguments[i + 3] == "ahc-short-keys" ? (0..<count).map { "ahc-\($0)" } : idempotencyKeys(count)
        print(await hammer(count, width: 8) { n in await barePost(client, to: url, n: n, key: keys[n]) })
        try await client.shutdown().get()
        #endif
    }
    await server.stop()
    try? FileManager.default.removeItem(at: root)  // `exit` skips the `defer` above
    exit(0)
}

say("courier-bench: sizes \(sizes), \(deliverCount) delivered, \(ProcessInfo.processInfo.activeProcessorCount) cores")
say("-- pending messages: memory and open time (each in a fresh process; ~150-byte JSON bodies)")
var sendSecondsPerMessage = 0.0, recordBytes = 0
for size in sizes {
    let dir = root.appendingPathComponent("pending-\(size)")
    let fill = try runChild(["--fill", dir.path, String(size)]).split(separator: " ").compactMap {
        Double($0.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    let open = try runChild(["--open", dir.path, String(size)]).split(separator: " ").compactMap {
        Double($0.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    let disk = try diskBytes(dir)
    line("\(size) pending: open (replay included)", String(format: "%8.3f s", open[0]))
    line(
        "\(size) pending: memory after open (RSS growth)", String(format: "%8.0f bytes/message", open[1] / Double(size))
    )
    line(
        "\(size) pending: memory while sending (RSS growth)",
        String(format: "%8.0f bytes/message", fill[1] / Double(size)))
    line("\(size) pending: log on disk", String(format: "%8.0f bytes/message", Double(disk) / Double(size)))
    if sendSecondsPerMessage == 0 || size == 100_000 {
        sendSecondsPerMessage = fill[0] / Double(size)
        recordBytes = disk / size
    }
    try? FileManager.default.removeItem(at: dir)
}

say("-- send, next to what an app would do instead (same run, same ~150-byte JSON message)")
do {
    let count = 100_000
    let dir = root.appendingPathComponent("send")
    let courier = try Courier(directory: dir, configuration: benchConfiguration())
    let courierSeconds = try clock.measure { for i in 0..<count { try courier.send(benchMessage(i), to: target) } }
    await courier.close()
    let perSend = seconds(courierSeconds) / Double(count)
    let body = Array(try JSONSerialization.data(withJSONObject: benchMessage(1)))
    let id = Array(UUID().uuidString.utf8)
    let sqliteCount = 20_000
    let sqlite = SQLiteBaseline()
    // The row alone (body and id made beforehand), and the row as an app makes it (JSON with
    // JSONSerialization and a UUID per message, the work Courier's send also does).
    let rowAlone = sqlite?.insertEachInItsOwnTransaction(
        count: sqliteCount, path: root.appendingPathComponent("rows.sqlite").path
    ) { _ in (id, body) }
    let rowAsApp = sqlite?.insertEachInItsOwnTransaction(
        count: sqliteCount, path: root.appendingPathComponent("app.sqlite").path
    ) { i in
        (Array(UUID().uuidString.utf8), Array((try? JSONSerialization.data(withJSONObject: benchMessage(i))) ?? Data()))
    }
    let bare = bareWrites(count: count, recordBytes: recordBytes, path: root.appendingPathComponent("bare.bin").path)
    line(
        "Courier send (default durability, returns after write(2))",
        String(format: "%8.0f sends/s  %6.2f µs", 1 / perSend, perSend * 1e6))
    if let rowAlone, let rowAsApp {
        for (label, total) in [
            ("SQLite row per transaction, alone (WAL, sync=NORMAL)", rowAlone),
            ("SQLite row per transaction + JSONSerialization + UUID", rowAsApp)
        ] {
            let perRow = total / Double(sqliteCount)
            line(label, String(format: "%8.0f rows/s   %6.2f µs", 1 / perRow, perRow * 1e6))
            line("  ratio: Courier send is", String(format: "%8.1fx faster", perRow / perSend))
        }
    } else {
        line("SQLite", "libsqlite3 not found: skipped")
    }
    line(
        "bare write(2) of \(recordBytes) bytes (the floor)",
        String(format: "%8.0f writes/s %6.2f µs", Double(count) / bare, bare / Double(count) * 1e6))
    line("  ratio Courier / write(2)", String(format: "%8.1fx the floor's cost", perSend / (bare / Double(count))))
}

/// POSTs `count` requests `width` wide with `post`, retrying failures at once; returns seconds.
func hammer(_ count: Int, width: Int, _ post: @escaping @Sendable (Int) async -> Bool) async -> Double {
    let start = clock.now
    await withTaskGroup(of: Void.self) { group in
        for lane in 0..<width {
            group.addTask {
                var i = lane
                while i < count {
                    var tries = 0
                    while !(await post(i)) && tries < 100 { tries += 1 }
                    i += width
                }
            }
        }
    }
    return seconds(start.duration(to: clock.now))
}

/// Delivers `count` messages with Courier to `url`; returns seconds from the first send to idle.
func courierRun(
    _ count: Int, to url: URL, round: String, segmentBytes: Int? = nil, fileSystem: (any LogFileSystem)? = nil,
    inspect: ((Courier) -> Void)? = nil
) async throws -> Double {
    var config = Courier.Configuration()
    config.allowsPurgeableDirectory = true  // a scratch directory, in tmp
    if let segmentBytes {
        config.segmentSizeBytes = segmentBytes
        config.maximumMessageBytes = 4096
    }
    if let fileSystem { config.fileSystem = fileSystem }
    config.maximumConcurrentDeliveries = 8
    config.retry = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(10))
    let courier = try Courier(directory: root.appendingPathComponent("deliver-\(round)"), configuration: config)
    let start = clock.now
    for i in 0..<count { try courier.send(["n": i, "text": "hello"], to: url) }
    await courier.waitUntilIdle()
    let elapsed = seconds(start.duration(to: clock.now))
    inspect?(courier)
    await courier.close()
    return elapsed
}

for failureRate in [0.0, 0.5] {
    say(
        "-- delivery to the loopback flaky server, \(Int(failureRate * 100))% 500s, 8 wide (best of 2 runs, "
            + "interleaved)"
    )
    let server = try await FlakyServer(behavior: .init(failureRate: failureRate, seed: 7))
    let url = await server.url
    #if canImport(AsyncHTTPClient)
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    func ahcRun(_ round: Int) async -> Double {
        let keys = idempotencyKeys(deliverCount)
        return await hammer(deliverCount, width: 8) { i in await barePost(client, to: url, n: i, key: keys[i]) }
    }
    // Interleaved, so neither side gains from running second (warm server, warm caches).
    var ahcSeconds = await ahcRun(1)
    var courierSeconds = try await courierRun(deliverCount, to: url, round: "\(failureRate)-1")
    courierSeconds = min(courierSeconds, try await courierRun(deliverCount, to: url, round: "\(failureRate)-2"))
    ahcSeconds = min(ahcSeconds, await ahcRun(2))
    try await client.shutdown().get()
    #else
    let courierSeconds = try await courierRun(deliverCount, to: url, round: "\(failureRate)-1")
    #endif
    line(
        "Courier (AsyncHTTPClient), retries with backoff",
        String(format: "%8.0f delivered/s", Double(deliverCount) / courierSeconds))
    #if canImport(AsyncHTTPClient)
    line(
        "bare AsyncHTTPClient, immediate retries",
        String(format: "%8.0f delivered/s", Double(deliverCount) / ahcSeconds))
    line("  ratio Courier / bare AsyncHTTPClient", String(format: "%8.2f", ahcSeconds / courierSeconds))
    #endif
    let session = URLSession(configuration: .ephemeral)
    let sessionKeys = idempotencyKeys(deliverCount)
    let urlSessionSeconds = await hammer(deliverCount, width: 8) { i in
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = Data(#"{"n":\#(i),"text":"hello"}"#.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(sessionKeys[i], forHTTPHeaderField: "Idempotency-Key")
        request.timeoutInterval = 30
        guard let (_, response) = try? await session.data(for: request) else { return false }
        return (response as? HTTPURLResponse)?.statusCode == 200
    }
    line(
        "bare URLSession, immediate retries",
        String(format: "%8.0f delivered/s", Double(deliverCount) / urlSessionSeconds))
    await server.stop()
    let s = server.statistics
    line(
        "  server saw",
        "\(s.requests) requests, \(s.acceptedKeys) keys accepted, \(s.duplicateAccepts) duplicate accepts")
}

say("-- idle: a fresh process with an open courier and nothing due (\(Int(idleSeconds)) s measured)")
do {
    let idle = try runChild(["--idle", root.appendingPathComponent("idle").path, String(idleSeconds)])
        .split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    let perMinute = 60 / idleSeconds
    line("CPU while idle", String(format: "%8.2f ms per minute", idle[0] * 1000 * perMinute))
    line("voluntary context switches (whole process)", String(format: "%8.1f per minute", idle[1] * perMinute))
}

// `courier-bench --soak N` (make soak): N messages through one courier and the loopback flaky
// server (20% 500s), in batches of 10,000 with small segments, so the log rolls and compacts
// hundreds of times. After each batch it prints the disk the log holds, the process's resident
// memory and the compactions so far; at the end it checks that the server accepted every
// message. The server runs in a child process (`--serve RATE`): it remembers every key, and
// its memory would otherwise hide Courier's. Minutes, not part of `make test`.
@_spi(CourierTesting) import CourierKit
import FlakyServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `courier-bench --serve RATE`: a flaky server on a free port; prints its URL, then serves
/// until killed.
func serve(failureRate: Double) async throws -> Never {
    let server = try await FlakyServer(behavior: .init(failureRate: failureRate, seed: 5))
    say(await server.url.absoluteString)
    while true { try await Task.sleep(for: .seconds(3600)) }
}

/// The child server's counters (`GET /stats`).
func serverStatistics(_ url: URL) async throws -> [String: Any] {
    let stats = URL(string: "/stats", relativeTo: url)!
    let (data, _) = try await URLSession.shared.data(from: stats)
    return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
}

func soak(_ total: Int, directory: URL) async throws {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["--serve", "0.2"]
    let pipe = Pipe()
    child.standardOutput = pipe
    try child.run()
    defer { child.terminate() }
    var urlLine = Data()
    // One byte a turn until the newline: bounded by the URL's length.
    while urlLine.count < 200, let byte = try pipe.fileHandleForReading.read(upToCount: 1), !byte.isEmpty,
        byte != Data([10])
    { urlLine += byte }
    guard let url = URL(string: String(decoding: urlLine, as: UTF8.self)) else {
        say("soak: the server did not start"); exit(1)
    }
    var config = Courier.Configuration()
    config.allowsPurgeableDirectory = true  // a scratch directory, in tmp
    config.segmentSizeBytes = 256 << 10
    config.maximumMessageBytes = 64 << 10
    config.maximumConcurrentDeliveries = 8
    config.retry = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(20))
    let courier = try Courier(directory: directory, configuration: config)
    let batch = 10_000
    var sent = 0, maxDisk = 0
    var rss: [Int] = []
    let start = clock.now
    say("soak: \(total) messages, batches of \(batch), 256 KiB segments, 20% 500s, server in another process")
    // One turn per batch: bounded by total / batch.
    while sent < total {
        let count = min(batch, total - sent)
        for i in sent..<(sent + count) { try courier.send(benchMessage(i), to: url) }
        sent += count
        await courier.waitUntilIdle()
        let disk = try diskBytes(directory)
        maxDisk = max(maxDisk, disk)
        rss.append(residentBytes())
        if rss.count == 1 || sent % (10 * batch) == 0 || sent == total {
            line(
                "\(sent) sent, all delivered",
                String(
                    format: "disk %7.0f KiB  RSS %6.1f MiB  compactions %5d  %5.0f s",
                    Double(disk) / 1024, Double(rss.last!) / 1048576,
                    courier.compactionCountForTesting, seconds(start.duration(to: clock.now))))
        }
    }
    await courier.close()
    let s = try await serverStatistics(url)
    let accepted = s["accepted_keys"] as? Int ?? 0
    line(
        "server (another process)",
        "\(s["requests"] ?? 0) requests, \(accepted) keys accepted, \(s["duplicate_accepts"] ?? 0) duplicate accepts")
    line("largest log on disk", String(format: "%.0f KiB", Double(maxDisk) / 1024))
    let settled = rss.dropFirst(rss.count / 10)  // after warm-up
    line(
        "RSS after the first tenth → at the end",
        String(format: "%.1f → %.1f MiB", Double(settled.first ?? 0) / 1048576, Double(rss.last ?? 0) / 1048576))
    guard accepted == total else {
        say("soak: FAILED: \(total - accepted) messages never reached the server")
        exit(1)
    }
    say("soak: every message arrived")
}

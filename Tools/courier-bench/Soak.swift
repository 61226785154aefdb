// `courier-bench --soak N` (make soak): N messages through one courier and the loopback flaky
// server (20% 500s), in batches of 10,000 with small segments, so the log rolls and compacts
// hundreds of times. After each batch it prints the disk the log holds, the process's resident
// memory and the compactions so far; at the end it checks that the server accepted every
// message. Minutes, not part of `make test`.
@_spi(CourierTesting) import Courier
import FlakyServer
import Foundation

func soak(_ total: Int, directory: URL) async throws {
    let server = try await FlakyServer(behavior: .init(failureRate: 0.2, seed: 5))
    let url = await server.url
    var config = Courier.Configuration()
    config.segmentSizeBytes = 256 << 10
    config.maximumMessageSize = 64 << 10
    config.maxConcurrentDeliveries = 8
    config.retry = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(20))
    let courier = try Courier(directory: directory, configuration: config)
    let batch = 10_000
    var sent = 0, maxDisk = 0
    var rss: [Int] = []
    let start = clock.now
    say("soak: \(total) messages, batches of \(batch), 256 KiB segments, 20% 500s")
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
            line("\(sent) sent, all delivered", String(format: "disk %7.0f KiB  RSS %6.1f MiB  compactions %5d  %5.0f s",
                                                     Double(disk) / 1024, Double(rss.last!) / 1048576,
                                                     courier.compactionCountForTesting, seconds(start.duration(to: clock.now))))
        }
    }
    await courier.close()
    await server.stop()
    let s = server.statistics
    line("server", "\(s.requests) requests, \(s.acceptedKeys) keys accepted, \(s.duplicateAccepts) duplicate accepts")
    line("largest log on disk", String(format: "%.0f KiB", Double(maxDisk) / 1024))
    let settled = rss.dropFirst(rss.count / 10)  // after warm-up
    line("RSS after the first tenth → at the end", String(format: "%.1f → %.1f MiB", Double(settled.first ?? 0) / 1048576, Double(rss.last ?? 0) / 1048576))
    guard s.acceptedKeys == total else {
        say("soak: FAILED: \(total - s.acceptedKeys) messages never reached the server")
        exit(1)
    }
    say("soak: every message arrived")
}

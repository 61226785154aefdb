#if canImport(AsyncHTTPClient)
import CourierKit
import FlakyServer
import Foundation

// `courier-bench --batching N` (make bench-batching, issue 46): N of the bench's messages to the
// loopback server at 0% failures, through the public API, side by side in one run: one request
// per message (the default), gzip, batches of 50, and batches of 50 with gzip. Per line:
// requests per delivered message, body bytes on the wire per message (what the transport was
// handed, after compression), and the drain time.

/// Counts the bodies the default transport is handed.
final class BodyBytes: DeliveryTransport, @unchecked Sendable {
    // Why `@unchecked Sendable`: `total` is only reached holding `lock`; `inner` is Sendable.
    private let inner = AsyncHTTPClientTransport()
    private let lock = NSLock()
    private var total = 0
    var bytes: Int { lock.withLock { total } }

    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        lock.withLock { total += request.body.count }
        return await inner.deliver(request)
    }

    func shutdown() async { await inner.shutdown() }
}

func batchingBenchmark(count: Int, root: URL) async throws {
    say("-- \(count) bench messages, 0% failures, loopback: per message, gzip, batches of 50 (issue 46)")
    say("   options | requests a message | body bytes a message | drain")
    let batches = Batching(maximumCount: 50, maximumBytes: 1 << 20, maximumDelay: .milliseconds(100))
    let runs: [(String, DestinationOptions)] = [
        ("one request per message (the default)", DestinationOptions()),
        ("gzip", DestinationOptions(gzip: true)),
        ("batches of 50", DestinationOptions(batching: batches)),
        ("batches of 50, gzip", DestinationOptions(batching: batches, gzip: true))
    ]
    for (index, (name, options)) in runs.enumerated() {
        let server = try await FlakyServer(behavior: .init(failureRate: 0, seed: 46))
        let url = await server.url
        var configuration = Courier.Configuration()
        configuration.allowsPurgeableDirectory = true  // a scratch directory, in tmp
        let transport = BodyBytes()
        configuration.transport = transport
        configuration.destinations["http://\(url.host!):\(url.port!)"] = options
        let courier = try Courier(
            directory: root.appendingPathComponent("batching-\(index)"), configuration: configuration)
        let start = ContinuousClock.now
        for i in 0..<count { try courier.send(benchMessage(i), to: url) }
        // Polls: the drain to the nearest 20 ms; 300 s bounds the loop.
        while courier.pendingCount > 0 && start.duration(to: .now) < .seconds(300) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let elapsed = seconds(start.duration(to: .now))
        let delivered = Double(max(1, count - courier.pendingCount))
        let requests = Double(server.statistics.requests)
        line(
            name,
            String(
                format: "%.3f | %.1f | %.2f s%@", requests / delivered, Double(transport.bytes) / delivered, elapsed,
                courier.pendingCount > 0 ? " (\(courier.pendingCount) not delivered)" : ""))
        await courier.close()
        await server.stop()
    }
}
#endif

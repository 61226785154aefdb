// courier-bench: Courier's figures, measured side by side in one run (release build).
//
//     swift run -c release courier-bench [PENDING] [DELIVER]     (make bench-courier)
//
// 1. `send` alone: PENDING messages to a transport that never answers (all stay pending).
// 2. Memory per pending message (resident set growth / PENDING).
// 3. Replay: reopening the directory with PENDING messages pending.
// 4. Delivered per second to the loopback flaky server (0% and 50% failures), next to bare
//    URLSession and bare AsyncHTTPClient POSTing the same number of requests 8 wide.
#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
#endif
import Courier
import FlakyServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let pendingCount = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 100_000 : 100_000
let deliverCount = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 4_000 : 4_000

/// A transport that never answers until cancelled: every message stays pending.
struct Parked: DeliveryTransport {
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        try? await Task.sleep(for: .seconds(86_400))
        return .failure(TransportFailure(.cancelled, "cancelled"))
    }
}

func residentBytes() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = statm.split(separator: " ")
    return (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
func line(_ label: String, _ value: String) { print(label.padding(toLength: 52, withPad: " ", startingAt: 0) + value) }

let clock = ContinuousClock()
let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-bench-\(getpid())")
defer { try? FileManager.default.removeItem(at: root) }
let target = URL(string: "https://example.com/inbox")!

print("courier-bench: \(pendingCount) pending, \(deliverCount) delivered, \(ProcessInfo.processInfo.activeProcessorCount) cores")
do {
    var config = Courier.Configuration()
    config.transport = Parked()
    let dir = root.appendingPathComponent("pending")
    let courier = try Courier(directory: dir, configuration: config)
    let before = residentBytes()
    let elapsed = try clock.measure {
        for i in 0..<pendingCount {
            try courier.send(["text": "message number \(i) with a little payload", "n": i], to: target)
        }
    }
    let grown = residentBytes() - before
    line("send (the call alone), default durability", String(format: "%10.0f sends/s  %6.2f µs/send", Double(pendingCount) / seconds(elapsed), seconds(elapsed) / Double(pendingCount) * 1e6))
    line("memory per pending message (RSS growth)", "\(grown / pendingCount) bytes/message at \(pendingCount) pending")
    let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".wal") }
    let diskBytes = try segments.reduce(0) { $0 + ((try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent($1).path)[.size] as? Int) ?? 0) }
    line("log on disk", "\(segments.count) segments, \(diskBytes) bytes (\(diskBytes / pendingCount) bytes/message)")
    await courier.close()
    let replay = try await clock.measure {
        let reopened = try Courier(directory: dir, configuration: config)
        precondition(reopened.pendingCount == pendingCount)
        await reopened.close()
    }
    line("replay: open with \(pendingCount) pending", String(format: "%8.3f s  (%.0f messages/s)", seconds(replay), Double(pendingCount) / seconds(replay)))
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

for failureRate in [0.0, 0.5] {
    print("-- delivery to the loopback flaky server, \(Int(failureRate * 100))% 500s, 8 wide")
    let server = try await FlakyServer(behavior: .init(failureRate: failureRate, seed: 7))
    let url = await server.url
    var config = Courier.Configuration()
    config.maxConcurrentDeliveries = 8
    config.retry = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(10))
    let dir = root.appendingPathComponent("deliver-\(failureRate)")
    let courier = try Courier(directory: dir, configuration: config)
    let start = clock.now
    for i in 0..<deliverCount { try courier.send(["n": i, "text": "hello"], to: url) }
    await courier.waitUntilIdle()
    let courierSeconds = seconds(start.duration(to: clock.now))
    await courier.close()
    line("Courier (AsyncHTTPClient), retries with backoff", String(format: "%8.0f delivered/s", Double(deliverCount) / courierSeconds))

    let session = URLSession(configuration: .ephemeral)
    let urlSessionSeconds = await hammer(deliverCount, width: 8) { i in
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = Data(#"{"n":\#(i),"text":"hello"}"#.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("bare-\(failureRate)-\(i)", forHTTPHeaderField: "Idempotency-Key")
        request.timeoutInterval = 30
        guard let (_, response) = try? await session.data(for: request) else { return false }
        return (response as? HTTPURLResponse)?.statusCode == 200
    }
    line("bare URLSession, immediate retries", String(format: "%8.0f delivered/s", Double(deliverCount) / urlSessionSeconds))

    #if canImport(AsyncHTTPClient)
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    let ahcSeconds = await hammer(deliverCount, width: 8) { i in
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Idempotency-Key", value: "ahc-\(failureRate)-\(i)")
        request.body = .bytes(.init(string: #"{"n":\#(i),"text":"hello"}"#))
        guard let response = try? await client.execute(request, timeout: .seconds(30)) else { return false }
        _ = try? await response.body.collect(upTo: 1 << 16)
        return response.status.code == 200
    }
    try await client.shutdown().get()
    line("bare AsyncHTTPClient, immediate retries", String(format: "%8.0f delivered/s", Double(deliverCount) / ahcSeconds))
    #endif
    line("  ratio Courier / bare URLSession", String(format: "%8.2f", urlSessionSeconds / courierSeconds))
    await server.stop()
    let s = server.statistics
    line("  server saw", "\(s.requests) requests, \(s.acceptedKeys) keys accepted, \(s.duplicateAccepts) duplicate accepts")
}

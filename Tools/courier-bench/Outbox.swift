@_spi(CourierTesting) import CourierKit
import CourierLog
import FlakyServer
import Foundation
import RetryScenarios

/// `courier-bench --outbox N`: `ExtensionOutbox.send` next to `Courier.send`, in one run.
///
/// 1. Sends per second: N sends through an outbox (one fsync each, as `.always`), through a
///    courier with `durability: .always`, and through one with the default `.interval`, each into
///    a fresh directory, the order rotated per round (3 rounds, medians).
/// 2. Send to delivered: N messages, one every 5 ms, to the loopback server (no failures), sent
///    by `Courier.send` and by an outbox whose app courier collects when the send's wake would
///    come (here: a collection right after each send, since Linux has no Darwin notification);
///    p50 and p99 of the time from each send call to its `.delivered` event.
func outboxBenchmark(count: Int, root: URL) async throws {
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    var rates: [String: [Double]] = [:]
    for round in 0..<3 {
        let order = ["outbox", "always", "interval"]
        for k in 0..<3 {
            let which = order[(k + round) % 3]
            let dir = root.appendingPathComponent("\(which)-\(round)")
            rates[which, default: []].append(try sendRate(which, count: count, directory: dir))
        }
    }
    func median(_ values: [Double]) -> Double { RetryScenarios.percentile(0.5, of: values.sorted()) }
    line("ExtensionOutbox.send (fsync each), sends/s", String(format: "%.0f", median(rates["outbox"]!)))
    line("Courier.send, durability .always, sends/s", String(format: "%.0f", median(rates["always"]!)))
    line("Courier.send, durability .interval (default), sends/s", String(format: "%.0f", median(rates["interval"]!)))
    line(
        "outbox ÷ .always", String(format: "%.2f", median(rates["outbox"]!) / median(rates["always"]!)))

    let server = try await FlakyServer(behavior: .init(failureRate: 0))
    let url = await server.url
    let direct = try await sendToDelivered(
        count: count / 4, url: url, root: root.appendingPathComponent("latency-direct"), throughOutbox: false)
    let extended = try await sendToDelivered(
        count: count / 4, url: url, root: root.appendingPathComponent("latency-outbox"), throughOutbox: true)
    await server.stop()
    line("send → delivered, Courier.send: p50 / p99 ms", String(format: "%.1f / %.1f", direct.p50, direct.p99))
    line(
        "send → delivered, ExtensionOutbox.send + collect: p50 / p99 ms",
        String(format: "%.1f / %.1f", extended.p50, extended.p99))
}

private func sendRate(_ which: String, count: Int, directory: URL) throws -> Double {
    let started = ContinuousClock.now
    if which == "outbox" {
        let outbox = try ExtensionOutbox(directory: directory, allowingPurgeable: true)
        for i in 0..<count { try outbox.send(benchMessage(i), to: target) }
    } else {
        var config = benchConfiguration()
        config.transport = Parked()
        config.durability = which == "always" ? .always : .interval(.seconds(1))
        let courier = try Courier(directory: directory, configuration: config)
        for i in 0..<count { try courier.send(benchMessage(i), to: target) }
        _ = courier
    }
    return Double(count) / seconds(ContinuousClock.now - started)
}

/// Milliseconds from each send call to its delivery, p50 and p99.
private func sendToDelivered(count: Int, url: URL, root: URL, throughOutbox: Bool) async throws -> (
    p50: Double, p99: Double
) {
    var config = benchConfiguration()
    config.transport = nil  // the default HTTP client, to the loopback server (not Parked)
    let outboxDirectory = root.appendingPathComponent("outbox")
    if throughOutbox { config.extensionOutboxDirectory = outboxDirectory }
    let courier = try Courier(directory: root.appendingPathComponent("app"), configuration: config)
    let outbox = throughOutbox ? try ExtensionOutbox(directory: outboxDirectory, allowingPurgeable: true) : nil
    var sentAt: [MessageID: ContinuousClock.Instant] = [:]
    // Delivery times by id: a delivery can be heard before its send's id is known here.
    let deliveredAt = Locked<[MessageID: ContinuousClock.Instant]>([:])
    let events = courier.events()
    let listener = Task {
        for await event in events {
            guard case .delivered(let id, _) = event else { continue }
            let now = ContinuousClock.now
            if deliveredAt.withLock({ d in
                d[id] = now; return d.count == count
            }) {
                return
            }
        }
    }
    for i in 0..<count {
        let now = ContinuousClock.now
        if let outbox {
            sentAt[try outbox.send(benchMessage(i), to: url)] = now
            await courier.collectExtensionMessages()
        } else {
            sentAt[try courier.send(benchMessage(i), to: url)] = now
        }
        try await Task.sleep(for: .milliseconds(5))
    }
    await listener.value
    await courier.close()
    let delivered = deliveredAt.withLock { $0 }
    let sorted = sentAt.compactMap { id, sent in delivered[id].map { seconds($0 - sent) * 1000 } }.sorted()
    return (RetryScenarios.percentile(0.5, of: sorted), RetryScenarios.percentile(0.99, of: sorted))
}

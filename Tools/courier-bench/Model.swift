import CHeap
import CourierKit
import Foundation

/// `courier-bench --model [N,...]`: what a `CourierModel` following a courier costs the main
/// actor, at N pending messages (default 1,000, 5,000 and 10,000), side by side in one run.
///
/// For each N, two fresh couriers of N pending messages (a transport that never answers): one
/// with a model following it, one without. In each, 1,000 of them are cancelled one by one, and
/// the model is waited for until it has applied every `.cancelled` event. CPU time (user +
/// system, the whole process) with the model minus without, per event, is what following costs;
/// the heap the model holds once it has loaded (glibc's `mallinfo2`), per message, is what
/// listing costs. Three rounds, the order alternated; medians.
@MainActor
func modelBenchmark(sizes: [Int], root: URL) async throws {
    let cancels = 1_000
    for size in sizes {
        var perEvent: [Double] = [], perMessage: [Double] = []
        for round in 0..<3 {
            var cpu: [Bool: Double] = [:]
            for withModel in round % 2 == 0 ? [false, true] : [true, false] {
                let directory = root.appendingPathComponent("model-\(size)-\(round)-\(withModel)")
                let run = try await cancelRun(size: size, cancels: cancels, withModel: withModel, directory: directory)
                cpu[withModel] = run.cpu
                if withModel { perMessage.append(run.heap / Double(size)) }
            }
            perEvent.append((cpu[true]! - cpu[false]!) / Double(cancels) * 1e6)
        }
        line(
            "model at \(size) pending: main-actor CPU per event", String(format: "%8.1f µs", perEvent.sorted()[1]))
        line("model at \(size) pending: heap per message", String(format: "%8.0f bytes", perMessage.sorted()[1]))
    }
}

@MainActor
private func cancelRun(size: Int, cancels: Int, withModel: Bool, directory: URL) async throws -> (
    cpu: Double, heap: Double
) {
    defer { try? FileManager.default.removeItem(at: directory) }
    var config = benchConfiguration()
    config.transport = Parked()
    let courier = try Courier(directory: directory, configuration: config)
    var ids: [MessageID] = []
    for i in 0..<size { ids.append(try courier.send(benchMessage(i), to: target)) }
    var model: CourierModel?
    var heap = 0.0
    if withModel {
        try await Task.sleep(for: .seconds(1.5))  // past the log's 1 s sync: its buffers settle
        let before = heapBytes()
        model = CourierModel(courier: courier)
        try await waitUntil { model!.pendingCount == size }
        heap = Double(heapBytes() - before)
    }
    let started = cpuUsage().seconds
    // The newest messages: queued behind the few the parked transport holds in flight.
    for id in ids.suffix(cancels) { precondition(courier.cancel(id), "not pending") }
    if let model { try await waitUntil { model.pendingCount == size - cancels } }
    let cpu = cpuUsage().seconds - started
    await courier.close()
    return (cpu, heap)
}

/// Polls every millisecond (the model applies events on the main actor, between polls); bounded
/// at 60 s.
@MainActor
private func waitUntil(_ condition: () -> Bool) async throws {
    for _ in 0..<60_000 where !condition() { try await Task.sleep(for: .milliseconds(1)) }
    precondition(condition(), "the model did not catch up in 60 s")
}

/// Bytes the heap has handed out and not taken back (glibc; 0 elsewhere).
private func heapBytes() -> Int { Int(courier_heap_in_use()) }

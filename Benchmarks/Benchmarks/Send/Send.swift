// The cost of accepting one ~150-byte message for later delivery, next to what an iOS team
// would build instead, each with 100, 1,000 and 10,000 messages already pending:
// - Courier's `send` (default durability: returns after write(2));
// - GRDB, one row per message, each in its own transaction (WAL, synchronous=NORMAL), with
//   the JSON made by JSONSerialization and the id by UUID(), as an app would write it;
// - rewriting a whole JSON file of every pending message per change, atomically, as
//   OfflineRequestManager and SwiftQueue do;
// - the floor: a bare write(2) of one record's bytes.
import Benchmark
@_spi(CourierTesting) import CourierKit
import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#endif

let pendingCounts = [100, 1_000, 10_000]
let inbox = URL(string: "https://example.com/inbox")!

func message(_ i: Int) -> [String: Any] {
    ["text": "message number \(i) with a little payload, typical of a chat or analytics event", "n": i, "kind": "bench"]
}

/// A transport that answers 200 at once: messages resolve, segments fill with settled records,
/// and the compactor runs alongside the sends.
struct Accepting: DeliveryTransport {
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome { .response(status: 200) }
}

/// A transport that never answers: every message stays pending.
struct Parked: DeliveryTransport {
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        try? await Task.sleep(for: .seconds(86_400))
        return .failure(TransportFailure(.cancelled, "cancelled"))
    }
}

/// What one benchmark works on, made in its setup hook and dropped in teardown.
final class Fixture: @unchecked Sendable {
    var directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-benchmark-\(UUID().uuidString)")
    var courier: Courier?
    var queue: DatabaseQueue?
    var pending: [[String: Any]] = []
    var fd: Int32 = -1
    var next = 0

    func reset() {
        if let courier { Task { await courier.close() } }
        courier = nil
        queue = nil
        pending = []
        if fd >= 0 { close(fd) }
        fd = -1
        try? FileManager.default.removeItem(at: directory)
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("courier-benchmark-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// A courier in a fresh directory with `pending` messages already sent. `segmentSizeBytes`
    /// nil keeps the default (8 MiB); smaller segments roll, and compact, sooner.
    func openCourier(_ transport: any DeliveryTransport, segmentSizeBytes: Int? = nil, pending: Int) throws {
        reset()
        var config = Courier.Configuration()
        config.transport = transport
        config.maximumStorageBytes = 1 << 30
        if let segmentSizeBytes {
            config.segmentSizeBytes = segmentSizeBytes
            config.maximumMessageBytes = segmentSizeBytes / 4
        }
        let c = try Courier(directory: directory, configuration: config)
        for i in 0..<pending { try c.send(message(i), to: inbox) }
        courier = c
        next = pending
    }

    /// The measured work of every `send` benchmark: one more message.
    func sendNext() throws {
        next += 1
        blackHole(try courier!.send(message(next), to: inbox))
    }
}

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(metrics: [.wallClock, .throughput, .mallocCountTotal],
                                                warmupIterations: 20, maxDuration: .seconds(3), maxIterations: 5_000)
    for pending in pendingCounts {
        let courier = Fixture()
        Benchmark("Courier send/\(pending)", configuration: configuration, closure: { benchmark in
            for _ in benchmark.scaledIterations { try courier.sendNext() }
        }, setup: { try courier.openCourier(Parked(), pending: pending) }, teardown: { courier.reset() })

        let grdb = Fixture()
        Benchmark("GRDB row per transaction/\(pending)", configuration: configuration, closure: { benchmark in
            for _ in benchmark.scaledIterations {
                grdb.next += 1
                let body = try JSONSerialization.data(withJSONObject: message(grdb.next))
                let id = UUID().uuidString
                try grdb.queue!.write { db in
                    try db.execute(sql: "INSERT INTO outbox(id, url, body, created, attempts, due) VALUES (?, ?, ?, ?, 0, ?)",
                                   arguments: [id, inbox.absoluteString, body, 1_700_000_000_000, 1_700_000_000_000])
                }
            }
        }, setup: {
            grdb.reset()
            var config = GRDB.Configuration()
            config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous=NORMAL") }
            let queue = try DatabaseQueue(path: grdb.directory.appendingPathComponent("outbox.sqlite").path, configuration: config)
            try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode=WAL") }
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE outbox(seq INTEGER PRIMARY KEY, id TEXT, url TEXT, body BLOB, created INTEGER, attempts INTEGER, due INTEGER)")
                for i in 0..<pending {
                    try db.execute(sql: "INSERT INTO outbox(id, url, body, created, attempts, due) VALUES (?, ?, ?, ?, 0, ?)",
                                   arguments: [UUID().uuidString, inbox.absoluteString, try JSONSerialization.data(withJSONObject: message(i)), 0, 0])
                }
            }
            grdb.queue = queue
        }, teardown: { grdb.reset() })

        let file = Fixture()
        Benchmark("JSON file rewrite/\(pending)", configuration: configuration, closure: { benchmark in
            for _ in benchmark.scaledIterations {
                file.next += 1
                var entry = message(file.next)
                entry["id"] = UUID().uuidString
                file.pending.append(entry)
                let data = try JSONSerialization.data(withJSONObject: file.pending)
                try data.write(to: file.directory.appendingPathComponent("queue.json"), options: .atomic)
                file.pending.removeFirst()  // one delivered for each one added: the count stays
            }
        }, setup: {
            file.reset()
            file.pending = (0..<pending).map { var m = message($0); m["id"] = UUID().uuidString; return m }
        }, teardown: { file.reset() })
    }

    // Compaction: its time with 1,000 and 10,000 pending messages to re-snapshot (64 KiB
    // segments, each compaction forced), and `send`'s p99 while the compactor runs on its own
    // alongside (messages delivered at once, 64 KiB segments: it runs every few hundred sends).
    for pending in [1_000, 10_000] {
        let compacting = Fixture()
        Benchmark("Courier compaction/\(pending)", configuration: configuration, closure: { benchmark in
            for _ in benchmark.scaledIterations { compacting.courier!.compactNowForTesting() }
        }, setup: { try compacting.openCourier(Parked(), segmentSizeBytes: 64 << 10, pending: pending) },
        teardown: { compacting.reset() })
    }
    let alongside = Fixture()
    Benchmark("Courier send while compacting", configuration: configuration, closure: { benchmark in
        for _ in benchmark.scaledIterations { try alongside.sendNext() }
    }, setup: { try alongside.openCourier(Accepting(), segmentSizeBytes: 64 << 10, pending: 0) },
    teardown: { alongside.reset() })

    let bare = Fixture()
    Benchmark("write(2) of one record", configuration: configuration, closure: { benchmark in
        let record = [UInt8](repeating: 0x41, count: 280)  // one Courier record of such a message
        for _ in benchmark.scaledIterations {
            _ = record.withUnsafeBytes { write(bare.fd, $0.baseAddress, $0.count) }
        }
    }, setup: {
        bare.reset()
        bare.fd = open(bare.directory.appendingPathComponent("bare.bin").path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
    }, teardown: { bare.reset() })
}

import CourierLog
import CourierLogTesting
import Testing

/// Seeded random runs of appends, batches, syncs, forgets, faults and crashes, checked
/// against a model of what was acknowledged and what was durable.
@Suite struct ModelTests {
    struct Model {
        /// Acknowledged records by sequence number.
        var acknowledged: [UInt64: [UInt8]] = [:]
        /// Records whose append threw after its bytes may have reached the file.
        var uncertain: [UInt64: [UInt8]] = [:]
        var durableThrough: UInt64 = 0
        var floor: UInt64 = 0
    }

    @Test(arguments: 1...24)
    func randomRunsNeverLoseDurableRecordsNorInventAny(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let fs = SimulatedFileSystem()
        let config = testConfiguration(segmentSizeBytes: 4096)
        var log = try WriteAheadLog(directory: dir, configuration: config, fileSystem: fs)
        var model = Model()
        var counter = 0
        for step in 0..<300 {
            // CPU-bound: shares the cooperative pool with the run's real-time tests.
            if step % 10 == 0 { await Task.yield() }
            let roll = Int.random(in: 0..<100, using: &rng)
            counter += 1
            let b = body(counter, bytes: Int.random(in: 20...400, using: &rng))
            switch roll {
            case 0..<55:
                let next = log.nextSequence
                do {
                    try log.append(b, kind: .enqueued)
                    model.acknowledged[next] = b
                } catch { model.uncertain[next] = b }
            case 55..<65:
                let next = log.nextSequence
                let n = Int.random(in: 1...4, using: &rng)
                let entries = (0..<n).map { LogEntry(kind: .attempted, body: body(counter * 10 + $0)) }
                do {
                    try log.append(batch: entries)
                    for (i, e) in entries.enumerated() { model.acknowledged[next + UInt64(i)] = e.body }
                } catch {}  // a failed batch is never visible (all-or-nothing)
            case 65..<75:
                if (try? log.sync()) != nil { model.durableThrough = log.nextSequence - 1 }
            case 75..<80:
                let floor = UInt64.random(in: 0...log.nextSequence, using: &rng)
                if (try? log.forget(below: floor)) != nil { model.floor = max(model.floor, floor) }
            case 80..<85:
                fs.inject(Bool.random(using: &rng) ? .error(28) : .error(5),
                          on: Bool.random(using: &rng) ? .write : .sync)
            case 85..<88:
                fs.inject(.shortWrite(bytes: Int.random(in: 0...60, using: &rng)), on: .write)
            default:
                var crashRng = SeededRandom(seed: seed &* 1000 &+ UInt64(step))
                fs.crash { _, unsynced in Int.random(in: 0...unsynced, using: &crashRng) }
                log = try WriteAheadLog(directory: dir, configuration: config, fileSystem: fs)
                try verify(log, model, "seed \(seed) step \(step)")
                model = rebase(model, log)
            }
        }
        fs.clearFaults()
        try? log.close()
    }

    /// After a crash and reopen: durable records above the floor are all there; nothing else
    /// appears but acknowledged or uncertain records; sequence numbers only grow.
    func verify(_ log: WriteAheadLog, _ model: Model, _ context: String) throws {
        var seen: [UInt64: [UInt8]] = [:]
        var last: UInt64 = 0
        let report = try log.reader.read { r in
            #expect(r.sequence > last, "\(context)")
            last = r.sequence
            seen[r.sequence] = Array(r.body)
        }
        #expect(report.isClean, "\(context): \(report.damaged)")
        for (seq, body) in model.acknowledged where seq <= model.durableThrough && seq >= model.floor {
            #expect(seen[seq] == body, "\(context): durable record \(seq) lost")
        }
        for (seq, body) in seen {
            #expect(model.acknowledged[seq] == body || model.uncertain[seq] == body,
                    "\(context): record \(seq) invented")
        }
    }

    /// The model after a reopen: what survived is now durable (the recovery synced it).
    func rebase(_ model: Model, _ log: WriteAheadLog) -> Model {
        var m = Model()
        _ = try? log.reader.read { r in m.acknowledged[r.sequence] = Array(r.body) }
        m.durableThrough = log.nextSequence - 1
        m.floor = model.floor
        return m
    }
}

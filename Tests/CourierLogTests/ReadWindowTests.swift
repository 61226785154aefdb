import CourierLog
import CourierLogTesting
import Testing

/// Segments are read in 1 MiB windows, never whole: records that straddle window edges, a
/// record larger than a window, a batch held back across edges, and damage past the first
/// window read exactly as a whole-segment read would.
@Suite struct ReadWindowTests {
    /// Incompressible bytes, distinct per seed.
    func noise(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SeededRandom(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// A log whose one sealed segment is 8 MiB of records of many sizes, up to 3 MiB.
    func largeLog() throws -> (SimulatedFileSystem, [LogEntry]) {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir,
                                    configuration: testConfiguration(segmentSizeBytes: 8 << 20), fileSystem: fs)
        var entries: [LogEntry] = []
        let sizes = [150, 700_000, 3 << 20, 90, 1 << 20, 333_333, 5, 1_048_000, 200_000]
        for (i, size) in sizes.enumerated() {
            let entry = LogEntry(kind: .enqueued, body: noise(size, seed: UInt64(i)))
            try log.append(entry.body, kind: entry.kind)
            entries.append(entry)
        }
        let batch = (0..<40).map { LogEntry(kind: .snapshot, body: noise(50_000, seed: 100 + UInt64($0))) }
        try log.append(batch: batch)
        entries += batch
        try log.close()
        return (fs, entries)
    }

    @Test func recordsStraddlingReadWindowsReadBackExactly() throws {
        let (fs, entries) = try largeLog()
        let (records, report) = try readAll(fs)
        let same = records.map(\.body) == entries.map(\.body)
        #expect(same)
        #expect(report.isClean)
        let straddles = records.contains { Int($0.address.offset) < 1 << 20 && $0.address.end > 1 << 20 }
        #expect(straddles)
    }

    @Test func damagePastTheFirstWindowCostsOnlyTheRecordItHits() throws {
        let (fs, entries) = try largeLog()
        let (records, _) = try readAll(fs)
        let victim = records[4]  // the 1 MiB record, starting well past the first window
        #expect(Int(victim.address.offset) > 1 << 20)
        let path = dir + "/" + victim.segment
        var bytes = fs.contents(of: path)!
        bytes[Int(victim.address.offset) + 500] ^= 0xFF
        fs.setContents(bytes, of: path)
        let (after, report) = try readAll(fs)
        let expected = entries.enumerated().filter { $0.offset != 4 }.map(\.element.body)
        let same = after.map(\.body) == expected
        #expect(same)
        #expect(report.damaged.count == 1)
        #expect(report.damaged.first?.offset == Int(victim.address.offset))
    }

    @Test func aZeroFilledTailLongerThanAWindowIsEndOfLog() throws {
        let (fs, entries) = try largeLog()
        let path = fs.allPaths().filter { $0.hasSuffix(".wal") }.sorted().last!  // the newest
        fs.setContents(fs.contents(of: path)! + [UInt8](repeating: 0, count: 3 << 20), of: path)
        let log = try WriteAheadLog(directory: dir,
                                    configuration: testConfiguration(segmentSizeBytes: 8 << 20), fileSystem: fs)
        #expect(log.recovery.tornTail?.reason == "zero-filled")
        #expect(log.recovery.tornTail?.length == 3 << 20)
        try log.close()
        let (records, _) = try readAll(fs)
        let same = records.map(\.body) == entries.map(\.body)
        #expect(same)
    }
}

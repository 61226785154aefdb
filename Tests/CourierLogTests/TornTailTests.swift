import CourierLog
import CourierLogTesting
import Testing

/// A torn write at the end of the newest segment is end of log, not corruption: recovery keeps
/// exactly the records that lie wholly before the cut.
@Suite struct TornTailTests {
    /// A few hundred records; the newest segment is cut at every byte offset of its last ones.
    /// Long and CPU-bound: it yields after each cut, so it shares the cooperative pool (as
    /// many threads as cores) with the run's real-time tests instead of holding a thread.
    @Test func truncatedTrailingRecordsAreIgnoredAtEveryByteOffset() async throws {
        let fs = SimulatedFileSystem()
        let entries = try writeLog(fs, count: 300)
        let (all, _) = try readAll(fs)
        let newest = segmentPaths(fs).last!
        let newestName = String(newest.split(separator: "/").last!)
        let inNewest = all.filter { $0.segment == newestName }
        let fileSize = fs.contents(of: newest)!.count
        let firstCut = Int(inNewest.suffix(8).first!.address.offset)
        #expect(fileSize - firstCut > 1000)
        for cut in firstCut...fileSize {
            await Task.yield()
            let damaged = copyFileSystem(fs) { path, bytes in path == newest ? Array(bytes.prefix(cut)) : bytes }
            let expected = all.filter { $0.segment != newestName || $0.address.end <= cut }
            // The read-only reader agrees with what recovery will keep …
            let (read, report) = try readAll(damaged)
            #expect(read == expected, "cut at \(cut)")
            #expect(report.isClean, "a torn tail is not damage (cut at \(cut))")
            #expect((report.tornTail != nil) == (expected.last!.address.end < cut))
            // … and opening cuts the tail away and carries on after it.
            let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: damaged)
            #expect(log.nextSequence == expected.last!.sequence + 1)
            try log.append(body(999), kind: .delivered)
            try log.close()
            let (after, afterReport) = try readAll(damaged)
            #expect(after.map(\.body) == entries.prefix(expected.count).map(\.body) + [body(999)], "cut at \(cut)")
            #expect(afterReport.isClean && afterReport.tornTail == nil)
        }
    }

    @Test func theCutTailIsCopiedAsideBeforeItIsRemoved() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 5)
        let path = segmentPaths(fs).last!
        let original = fs.contents(of: path)!
        let cut = original.count - 10
        fs.setContents(Array(original.prefix(cut)), of: path)
        let (records, _) = try readAll(fs)
        let tailStart = records.last!.address.end
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        let report = log.recovery
        try log.close()
        #expect(report.tornTail?.offset == tailStart)
        #expect(report.tornCopyPath == "\(path).\(tailStart).torn")
        #expect(fs.contents(of: report.tornCopyPath!) == Array(original[tailStart..<cut]))
        #expect(fs.contents(of: path)!.count == tailStart)
    }

    @Test func aZeroFilledTailIsEndOfLog() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 20)
        let path = segmentPaths(fs).last!
        fs.setContents(fs.contents(of: path)! + [UInt8](repeating: 0, count: 4096), of: path)
        let (records, report) = try readAll(fs)
        #expect(records.count == 20)
        #expect(report.isClean)
        #expect(report.tornTail?.reason == "zero-filled")
    }

    @Test func aGarbageTailIsEndOfLog() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 20)
        let path = segmentPaths(fs).last!
        var rng = SeededRandom(seed: 7)
        let garbage = (0..<3000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        fs.setContents(fs.contents(of: path)! + garbage, of: path)
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        #expect(log.recovery.tornTail?.length == 3000)
        try log.close()
        #expect(try readAll(fs).0.count == 20)
    }

    @Test func aBatchWhoseLastRecordIsTornIsDroppedWhole() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        try log.append(body(0), kind: .enqueued)
        try log.append(batch: (1...4).map { LogEntry(kind: .attempted, body: body($0)) })
        try log.close()
        let path = segmentPaths(fs).last!
        let bytes = fs.contents(of: path)!
        fs.setContents(Array(bytes.dropLast(1)), of: path)  // only the batch's last record is torn
        let (records, report) = try readAll(fs)
        #expect(records.map(\.sequence) == [1])
        #expect(report.tornTail?.reason == "batch without its last record")
    }

    @Test func aSegmentTornWhileBeingCreatedIsRemoved() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 3)
        // A crash after creating segment 4 but before its header was complete.
        fs.setContents(Array(SegmentHeader(salt: 1, firstSequence: 4, createdMilliseconds: 0).encoded().prefix(17)),
                       of: "/log/0000000000000004.wal")
        #expect(try readAll(fs).1.isClean)
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        #expect(log.recovery.removedSegment == "0000000000000004.wal")
        #expect(log.nextSequence == 4)
        try log.close()
    }
}

/// A damaged record followed by valid ones is corruption: it is skipped alone and reported.
@Suite struct CorruptionTests {
    /// Every byte of a sealed segment flipped in turn: each costs at most the record it hits.
    @Test func aFlippedByteCostsOnlyTheRecordItHits() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 40, segmentSizeBytes: 4096)
        let (all, _) = try readAll(fs)
        let target = segmentPaths(fs).first!
        let targetName = String(target.split(separator: "/").last!)
        let original = fs.contents(of: target)!
        let saltBytes = 16..<20
        for i in 0..<original.count {
            let damaged = copyFileSystem(fs) { path, bytes in
                guard path == target else { return bytes }
                var b = bytes
                b[i] ^= 0x5A
                return b
            }
            let (read, report) = try readAll(damaged)
            let hit = all.first { $0.segment == targetName && (Int($0.address.offset)..<$0.address.end).contains(i) }
            if let hit {
                #expect(read == all.filter { $0.sequence != hit.sequence }, "flip at \(i)")
                #expect(report.missingSequences == 1)
                #expect(report.damaged.count == 1 && report.damaged[0].offset == Int(hit.address.offset),
                        "flip at \(i)")
            } else if saltBytes.contains(i) {
                // The salt seeds every record's CRC: this segment's records are unreadable, and
                // reported as damage; later segments are untouched (the documented downside).
                #expect(read == all.filter { $0.segment != targetName })
                #expect(!report.isClean)
            } else {
                // Any other header byte: the header is reported, every record survives.
                #expect(read == all, "flip at \(i)")
                #expect(report.damaged.map(\.offset) == [0], "flip at \(i)")
            }
        }
    }

    @Test func damageInTheNewestSegmentFollowedByValidRecordsIsNotATornTail() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 10)
        let path = segmentPaths(fs).last!
        let (all, _) = try readAll(fs)
        var bytes = fs.contents(of: path)!
        bytes[Int(all[3].address.offset) + 50] ^= 1
        fs.setContents(bytes, of: path)
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        #expect(log.recovery.tornTail == nil)
        try log.close()
        let (read, report) = try readAll(fs)
        #expect(read.map(\.sequence) == [1, 2, 3, 5, 6, 7, 8, 9, 10])
        #expect(report.damaged == [DamagedSpan(segment: all[3].segment, offset: Int(all[3].address.offset),
                                               length: Int(all[3].address.length), reason: "checksum mismatch")])
    }

    @Test func aRunOfZerosInsideASegmentIsSkipped() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 10)
        let path = segmentPaths(fs).last!
        let (all, _) = try readAll(fs)
        var bytes = fs.contents(of: path)!
        let start = Int(all[2].address.offset)
        let end = all[5].address.end
        for i in start..<end { bytes[i] = 0 }
        fs.setContents(bytes, of: path)
        let (read, report) = try readAll(fs)
        #expect(read.map(\.sequence) == [1, 2, 7, 8, 9, 10])
        #expect(report.damaged.map(\.length) == [end - start])
        #expect(report.missingSequences == 4)
    }

    @Test func randomBytesNeverCrashTheReaderAndAreReportedAsDamage() throws {
        var rng = SeededRandom(seed: 42)
        for size in [0, 1, 39, 40, 41, 100, 5000] {
            let fs = SimulatedFileSystem()
            try fs.createDirectory(atPath: dir)
            fs.setContents((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) },
                           of: "/log/0000000000000001.wal")
            fs.setContents((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) },
                           of: "/log/0000000000000009.wal")
            let (records, report) = try readAll(fs)
            #expect(records.isEmpty)
            #expect(!report.isClean, "a sealed segment without a valid header is damage")
        }
    }

    @Test func craftedFakeHeadersCannotMakeResyncQuadratic() throws {
        // 1 MiB of fake record headers that all claim a long frame: each passes the cheap checks
        // and costs a long CRC. The resync budget bounds the work.
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 1)
        let path = segmentPaths(fs).last!
        var fake: [UInt8] = []
        for _ in 0..<(1 << 20) / 36 {
            fake += [0x50, 0x2A, 0x4D, 0x18, 28, 0, 0, 0, 0, 0, 0, 0]
            fake += [0x00, 0x00, 0x0F, 0x00]  // length ~1 MiB
            fake += [UInt8](repeating: 0, count: 20)
        }
        fs.setContents(fs.contents(of: path)! + fake, of: path)
        let clock = ContinuousClock()
        let elapsed = try clock.measure { _ = try readAll(fs) }
        #expect(elapsed < .seconds(20), "took \(elapsed)")
    }
}

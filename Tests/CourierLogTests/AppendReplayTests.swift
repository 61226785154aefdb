import CourierLog
import CourierLogTesting
import Foundation
import Testing

@Suite struct AppendReplayTests {
    @Test func recordsReadBackExactlyAsAppendedAcrossSegments() throws {
        let fs = SimulatedFileSystem()
        let entries = try writeLog(fs, count: 400)
        #expect(segmentPaths(fs).count > 3, "16 KiB segments must roll several times")
        let (records, report) = try readAll(fs)
        #expect(records.map(\.body) == entries.map(\.body))
        #expect(records.map(\.kind) == entries.map(\.kind))
        #expect(records.map(\.sequence) == Array(1...400))
        #expect(report.isClean && report.tornTail == nil && report.missingSequences == 0)
    }

    @Test func sequenceNumbersContinueAcrossReopens() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 10)
        try writeLog(fs, count: 10, first: 10)
        let (records, _) = try readAll(fs)
        #expect(records.map(\.sequence) == Array(1...20))
        #expect(records.map(\.body) == (0..<20).map { body($0) })
    }

    @Test func everyOpenStartsANewSegmentNamedByItsFirstSequence() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 3)
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        #expect(log.recovery.activeSegment == "0000000000000004.wal")
        #expect(log.segmentNames == ["0000000000000001.wal", "0000000000000004.wal"])
        #expect(log.segmentSummary == (count: 2, activeFirstSequence: 4), "the names' count and the last one's number")
        try log.close()
    }

    @Test func aSegmentWithNoRecordsIsReplacedOnOpen() throws {
        let fs = SimulatedFileSystem()
        for _ in 0..<5 { try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs).close() }
        #expect(segmentPaths(fs) == ["/log/0000000000000001.wal"])
    }

    @Test func replayAfterOpenSeesEveryRecord() throws {
        let fs = SimulatedFileSystem()
        let entries = try writeLog(fs, count: 50)
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        var bodies: [[UInt8]] = []
        _ = try log.reader.read { bodies.append(Array($0.body)) }
        #expect(bodies == entries.map(\.body))
        try log.close()
    }

    @Test func aBatchTakesConsecutiveSequenceNumbersAndMarksOnlyItsEnd() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        let addresses = try log.append(batch: (0..<3).map { LogEntry(kind: .attempted, body: body($0)) })
        #expect(addresses.map(\.sequence) == [1, 2, 3])
        try log.close()
        let (records, _) = try readAll(fs)
        #expect(records.map(\.flags) == [[], [], .batchEnd])
    }

    @Test func emptyBodiesAreRecordsToo() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        try log.append([], kind: .delivered)
        try log.close()
        #expect(try readAll(fs).0.map(\.body) == [[]])
    }

    @Test func aRecordLargerThanASegmentIsRefusedAndNothingIsWritten() throws {
        let fs = SimulatedFileSystem()
        let config = testConfiguration(segmentSizeBytes: 4096)
        let log = try WriteAheadLog(directory: dir, configuration: config, fileSystem: fs)
        var rng = SeededRandom(seed: 1)
        let random = (0..<5000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        #expect(throws: LogError.self) { try log.append(random, kind: .enqueued) }
        do { try log.append(random, kind: .enqueued) } catch  where error.code == .recordTooLarge {} catch {
            Issue.record("\(error)")
        }
        // The largest documented size fits even if it does not compress.
        let largest = (0..<config.maximumRecordBytes).map { _ in UInt8.random(in: 0...255, using: &rng) }
        try log.append(largest, kind: .enqueued)
        try log.close()
        #expect(try readAll(fs).0.map(\.body) == [largest])
    }

    @Test func appendsAfterCloseThrowClosed() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        try log.close()
        #expect { try log.append([1], kind: .enqueued) } throws: { ($0 as? LogError)?.code == .closed }
    }

    @Test func concurrentAppendersEachGetDistinctSequenceNumbers() async throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        let seqs = await withTaskGroup(of: [UInt64].self) { group in
            for t in 0..<8 {
                group.addTask {
                    (0..<100).compactMap { i in try? log.append(body(t * 1000 + i), kind: .enqueued).sequence }
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(seqs.sorted() == Array(1...800))
        try log.close()
        #expect(try readAll(fs).0.count == 800)
    }

    @Test func timestampsComeFromTheInjectedClock() throws {
        let fs = SimulatedFileSystem()
        try writeLog(fs, count: 2)
        #expect(try readAll(fs).0.map(\.timestampMilliseconds) == [1_763_700_000_000, 1_763_700_000_000])
    }
}

@Suite struct PosixLogTests {
    @Test func aSecondOpenerOfTheSameDirectoryIsRefused() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let first = try WriteAheadLog(directory: path)
        #expect { try WriteAheadLog(directory: path) } throws: { ($0 as? LogError)?.code == .locked }
        try first.close()
        let second = try WriteAheadLog(directory: path)  // released by close
        try second.close()
    }

    @Test func aLogOnDiskSurvivesReopenWithEveryPolicy() throws {
        for policy: WriteAheadLog.SyncPolicy in [.never, .always, .interval(.milliseconds(5))] {
            let path = temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: path) }
            var config = WriteAheadLog.Configuration()
            config.syncPolicy = policy
            config.segmentSizeBytes = 8192
            let log = try WriteAheadLog(directory: path, configuration: config)
            for i in 0..<200 { try log.append(body(i), kind: .enqueued) }
            try log.sync()
            #expect(log.durableSequence == 200)
            try log.close()
            let (records, report) = try readAll(PosixFileSystem(), path)
            #expect(records.map(\.body) == (0..<200).map { body($0) })
            #expect(report.isClean)
        }
    }

    @Test func aFileInPlaceOfTheDirectoryIsAClearError() throws {
        let folder = temporaryDirectory(), path = folder + "/file"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3]))
        #expect { try WriteAheadLog(directory: path) } throws: { ($0 as? LogError)?.code == .notADirectory }
    }
}

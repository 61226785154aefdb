import CourierLog
import CourierLogTesting
import Foundation
import Testing

/// Rolling ahead (`WriteAheadLog+Append.swift`): the next segment is created before the active
/// one fills and a sealed one is synced after the roll, both outside the log's lock, so that an
/// append under a caller's lock that forbids blocking I/O never waits for the disk.
@Suite struct RollAheadTests {
    func configuration(_ preparation: WriteAheadLog.SegmentPreparation) -> WriteAheadLog.Configuration {
        var c = testConfiguration(segmentSizeBytes: 4096)
        c.segmentPreparation = preparation
        return c
    }

    /// The double's promise, which the courier's tests rely on: it refuses a blocking call made
    /// under a lock that forbids one, and lets the same call through otherwise.
    @Test func theFileSystemDoubleRefusesAnFsyncUnderALockThatForbidsIt() throws {
        let fs = SimulatedFileSystem()
        let file = try fs.openFile(atPath: "/f", create: true)
        let forbidding = Locked(0, forbidsBlockingIO: true)
        let plain = Locked(0)
        #expect(throws: LogError.self) { try forbidding.withLock { _ throws(LogError) in try file.sync() } }
        #expect(throws: LogError.self) {
            try forbidding.withLock { _ throws(LogError) in try fs.syncDirectory(atPath: "/") }
        }
        try plain.withLock { _ throws(LogError) in try file.sync() }
        #expect(fs.blockingCallsRefused == 2)
    }

    /// Appends under a forbidding lock across many rolls: with `.background`, no fsync and no
    /// file creation is made under it, and every record reads back.
    @Test func appendsUnderALockThatForbidsBlockingIONeverSyncOrCreateAFile() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: configuration(.background), fileSystem: fs)
        let core = Locked(0, forbidsBlockingIO: true)
        for i in 0..<400 {
            try core.withLock { _ throws(LogError) in _ = try log.append(body(i), kind: .enqueued) }
            if i % 20 == 0 { log.waitForRollWork() }  // lets the spare be made now and then
        }
        log.waitForRollWork()
        #expect(fs.blockingCallsRefused == 0)
        #expect(log.segmentNames.count > 5, "the appends rolled: \(log.segmentNames)")
        try log.close()
        #expect(try readAll(fs).0.count == 400)
        #expect(!fs.allPaths().contains(dir + "/" + Format.spareSegmentName), "close removes the spare")
    }

    /// With no spare ready (its creation failed), the active segment grows past its size
    /// instead of rolling; a later try makes the spare and the next append rolls onto it.
    @Test func withNoSpareReadyTheActiveSegmentGrowsUntilOneIs() throws {
        let fs = SimulatedFileSystem()
        // The first create is the segment at open; the next 20 (spares, tried every 256 bytes) fail.
        fs.inject(.error(28), on: .create, skip: 1)
        for _ in 0..<19 { fs.inject(.error(28), on: .create) }
        let log = try WriteAheadLog(directory: dir, configuration: configuration(.inline), fileSystem: fs)
        var grewPastItsSize = false
        // Bounded: 100 records of 150 bytes (each about 120 in the log) outlast the failures.
        for i in 0..<100 {
            try log.append(body(i), kind: .enqueued)
            if log.segmentNames.count == 1, let size = try? fs.fileSize(atPath: dir + "/" + log.segmentNames[0]) {
                grewPastItsSize = grewPastItsSize || size > 4096
            }
        }
        #expect(grewPastItsSize, "no spare: the first segment took the records past its size")
        #expect(log.segmentNames.count >= 2, "the try after it grew made a spare, and it rolled")
        try log.close()
        #expect(try readAll(fs).0.count == 100)
    }

    /// `.inline`: an append that rolled returns once the sync after the roll made the sealed
    /// segment, the rename and the new segment durable.
    @Test func inlineAnAppendThatRolledReturnsWithTheSealedSegmentAndTheRenameDurable() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: configuration(.inline), fileSystem: fs)
        var i = 0
        while log.segmentNames.count < 2 {  // bounded: 4 KiB segments roll within 30 records
            try log.append(body(i), kind: .enqueued)
            i += 1
        }
        fs.crash()  // a power loss right after the append that rolled returned
        let (records, report) = try readAll(fs)
        #expect(records.count == i, "the sealed segment and the new one's first record survived")
        #expect(report.damaged.isEmpty)
    }

    /// A spare left by a crash (or a roll whose rename never reached the disk) is removed at
    /// open, and nothing reported durable is lost with it.
    @Test func aSpareLeftBehindIsRemovedAtOpen() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: configuration(.inline), fileSystem: fs)
        for i in 0..<20 { try log.append(body(i), kind: .enqueued) }
        try log.sync()
        #expect(fs.allPaths().contains(dir + "/" + Format.spareSegmentName),
                "after the first append: the spare is ready")
        fs.killProcess()
        let reopened = try WriteAheadLog(directory: dir, configuration: configuration(.inline), fileSystem: fs)
        #expect(!fs.allPaths().contains(dir + "/" + Format.spareSegmentName))
        try reopened.close()
        #expect(try readAll(fs).0.count == 20)
    }

    /// `forget` deletes and syncs outside the log's lock; a failed deletion puts the segment
    /// back, so the log never has a hole.
    @Test func aFailedForgetKeepsTheSegmentInTheLog() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: configuration(.inline), fileSystem: fs)
        var i = 0
        while log.segmentNames.count < 4 {  // bounded: 4 KiB segments roll within 30 records
            try log.append(body(i), kind: .enqueued)
            i += 1
        }
        let before = log.segmentNames
        fs.inject(.error(5), on: .remove)
        #expect(throws: LogError.self) { try log.forget(below: log.nextSequence) }
        #expect(log.segmentNames == before)
        let removed = try log.forget(below: log.nextSequence)
        #expect(removed == Array(before.dropLast()))
        try log.close()
    }
}

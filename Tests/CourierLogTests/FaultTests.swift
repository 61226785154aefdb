import Foundation
import CourierLog
import CourierLogTesting
import Testing

@Suite struct FaultTests {
    @Test func aFullDiskIsATypedErrorAndTheLogStaysUsable() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        try log.append(body(0), kind: .enqueued)
        let used = fs.allPaths().compactMap { fs.contents(of: $0)?.count }.reduce(0, +)
        fs.capacityBytes = used + 100  // room for half a record
        #expect { try log.append(body(1), kind: .enqueued) } throws: { ($0 as? LogError)?.code == .diskFull }
        #expect(fs.contents(of: segmentPaths(fs).last!)!.count == used, "the partial write is rolled back")
        fs.capacityBytes = nil  // space is freed
        #expect(try log.append(body(2), kind: .enqueued).sequence == 2)
        try log.close()
        let (records, report) = try readAll(fs)
        #expect(records.map(\.body) == [body(0), body(2)])
        #expect(report.isClean && report.tornTail == nil)
    }

    @Test func shortWritesAreCompleted() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        for n in [1, 7, 36, 100] { fs.inject(.shortWrite(bytes: n), on: .write) }
        for i in 0..<4 { try log.append(body(i), kind: .enqueued) }
        try log.close()
        #expect(try readAll(fs).0.map(\.body) == (0..<4).map { body($0) })
    }

    @Test func aWriteErrorFailsTheLogUntilItIsReopened() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        try log.append(body(0), kind: .enqueued)
        fs.inject(.shortWrite(bytes: 50), on: .write)
        fs.inject(.error(5), on: .write)  // EIO after a partial write
        #expect { try log.append(body(1), kind: .enqueued) } throws: { ($0 as? LogError)?.code == .io }
        #expect { try log.append(body(2), kind: .enqueued) } throws: { ($0 as? LogError)?.code == .failed }
        try? log.close()
        let reopened = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        #expect(reopened.recovery.tornTail?.length == 50, "the partial record is cut on reopen")
        try reopened.append(body(3), kind: .enqueued)
        try reopened.close()
        #expect(try readAll(fs).0.map(\.body) == [body(0), body(3)])
    }

    /// After a failed fsync the kernel may have dropped the dirty pages; a retried fsync could
    /// succeed over lost data. So the log never retries: it fails.
    @Test func aFailedFsyncIsNeverRetried() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(policy: .always), fileSystem: fs)
        try log.append(body(0), kind: .enqueued)
        let syncs = fs.count(of: .sync)
        fs.inject(.error(5), on: .sync)
        #expect { try log.append(body(1), kind: .enqueued) } throws: { ($0 as? LogError)?.code == .io }
        #expect { try log.sync() } throws: { ($0 as? LogError)?.code == .failed }
        #expect { try log.append(body(2), kind: .enqueued) } throws: { ($0 as? LogError)?.code == .failed }
        #expect(fs.count(of: .sync) == syncs + 1)
    }

    @Test func alwaysPolicyMakesEachAppendDurableBeforeItReturns() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(policy: .always), fileSystem: fs)
        for i in 0..<10 { try log.append(body(i), kind: .enqueued) }
        fs.crash()
        #expect(try readAll(fs).0.count == 10)
    }

    @Test func concurrentAlwaysAppendersShareFsyncs() async throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir,
                                    configuration: testConfiguration(segmentSizeBytes: 1 << 20, policy: .always),
                                    fileSystem: fs)
        let before = fs.count(of: .sync)
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                group.addTask { for i in 0..<50 { _ = try? log.append(body(t * 100 + i), kind: .enqueued) } }
            }
        }
        let syncs = fs.count(of: .sync) - before
        #expect(log.durableSequence == 400)
        #expect(syncs <= 400, "never more than one fsync per append")
        fs.crash()
        #expect(try readAll(fs).0.count == 400)
    }

    @Test func neverPolicyLosesUnsyncedRecordsOnPowerLossButNothingElse() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        for i in 0..<5 { try log.append(body(i), kind: .enqueued) }
        try log.sync()
        for i in 5..<9 { try log.append(body(i), kind: .enqueued) }
        fs.crash()
        #expect(try readAll(fs).0.map(\.sequence) == [1, 2, 3, 4, 5])
    }

    @Test func aLockedDirectoryIsRefusedInTheSameProcess() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        #expect { try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs) } throws: {
            ($0 as? LogError)?.code == .locked
        }
        try log.close()
    }
}

/// Crash at every file-system step of a scenario: the log must reopen, and hold every record
/// that was durable before the crash, in order, with no hole.
@Suite struct CrashPointTests {
    /// Runs `scenario` on a fresh log once per operation it performs, stopping the machine
    /// after k operations, then checks the recovered log.
    func crashAtEveryStep(prepare: (WriteAheadLog) throws -> Void,
                          scenario: (WriteAheadLog) throws -> Void,
                          check: ([LogRecord], Int) throws -> Void) throws {
        var k = 0
        while true {
            let fs = SimulatedFileSystem()
            let log = try WriteAheadLog(directory: dir,
                                        configuration: testConfiguration(segmentSizeBytes: 4096), fileSystem: fs)
            try prepare(log)
            try log.sync()
            let start = fs.operationCount
            fs.stopAfter(operations: k)
            try? scenario(log)
            let finished = fs.operationCount - start <= k
            fs.crash()
            let reopened = try WriteAheadLog(directory: dir,
                                             configuration: testConfiguration(segmentSizeBytes: 4096), fileSystem: fs)
            var records: [LogRecord] = []
            let report = try reopened.reader.read { records.append($0.record()) }
            #expect(report.isClean, "crash after \(k) operations: \(report.damaged)")
            try check(records, k)
            try reopened.close()
            if finished { break }
            k += 1
            guard k < 500 else { Issue.record("scenario never finished"); break }
        }
    }

    @Test func aCrashAtAnyStepOfASegmentRollLosesNoSyncedRecord() throws {
        var rolled = false
        try crashAtEveryStep(
            prepare: { log in for i in 0..<10 { try log.append(body(i), kind: .enqueued) } },
            scenario: { log in
                // 4 KiB segments hold ~20 records: this crosses at least one roll.
                for i in 10..<40 { try log.append(body(i), kind: .enqueued) }
                rolled = rolled || log.segmentNames.count > 1
                try log.sync()
            },
            check: { records, k in
                #expect(records.count >= 10, "synced records survive (crash after \(k))")
                #expect(records.map(\.sequence) == Array(1...UInt64(records.count)), "no hole (crash after \(k))")
                #expect(records.map(\.body) == (0..<records.count).map { body($0) })
            })
        #expect(rolled)
    }

    @Test func aCrashAtAnyStepOfForgetLeavesAContiguousSuffix() throws {
        try crashAtEveryStep(
            prepare: { log in for i in 0..<120 { try log.append(body(i), kind: .enqueued) } },
            scenario: { log in try log.forget(below: 100) },
            check: { records, k in
                let first = records.first!.sequence
                #expect(records.map(\.sequence) == Array(first...120), "crash after \(k)")
                #expect(first <= 100, "records at or above the floor are kept")
            })
    }

    @Test func aCrashAtAnyStepOfOpeningIsRecovered() throws {
        // A torn tail to cut, then a crash at each step of the cut and of the new segment.
        var k = 0
        while k < 100 {
            let fs = SimulatedFileSystem()
            try writeLog(fs, count: 10)
            let path = segmentPaths(fs).last!
            fs.setContents(Array(fs.contents(of: path)!.dropLast(7)), of: path)
            fs.stopAfter(operations: k)
            let opened = try? WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
            try? opened?.close()
            fs.crash()
            let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
            #expect(log.nextSequence == 10)
            try log.close()
            #expect(try readAll(fs).0.map(\.sequence) == Array(1...9))
            if opened != nil { break }
            k += 1
        }
    }
}

/// `.interval(d)` promises a sync about `d` after an append. Measured in a full test run: the
/// sync came 1.04 s after a 50 ms interval, because its timer ran on a global dispatch queue,
/// whose work waits (on Linux, for libdispatch's once-a-second pool monitor) when every worker
/// thread is busy or blocked, as an app's own code can leave them.
@Suite struct IntervalSyncTests {
    @Test(.timeLimit(.minutes(1)))
    func theIntervalSyncIsNotHeldUpByABusyDispatchPool() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(
            directory: dir, configuration: testConfiguration(policy: .interval(.milliseconds(20))), fileSystem: fs)
        defer { try? log.close() }
        // Block more global-queue workers than there are cores.
        let release = DispatchSemaphore(value: 0)
        let blockers = ProcessInfo.processInfo.activeProcessorCount * 4
        for _ in 0..<blockers { DispatchQueue.global(qos: .utility).async { release.wait() } }
        defer { for _ in 0..<blockers { release.signal() } }
        let sequence = try log.append(Array("x".utf8), kind: .enqueued).sequence
        let start = ContinuousClock.now
        // Bounded: at most 2,000 turns of 1 ms.
        for _ in 0..<2_000 where log.durableSequence < sequence { usleep(1_000) }
        let waited = start.duration(to: .now)
        #expect(log.durableSequence >= sequence)
        #expect(waited < .milliseconds(500), "synced \(waited) after the append, for a 20 ms interval")
    }
}

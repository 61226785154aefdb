@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

@Suite struct CompactionTests {
    let down = URL(string: "https://down.example/x")!

    @Test func diskUseStaysNearTwiceTheLiveDataPlusOneSegment() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport {
            $0.url.host == "down.example" ? .response(status: 500) : .response(status: 200)
        }
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.segmentSizeBytes = 16 << 10
        config.maximumMessageBytes = 1024
        let courier = try Courier(directory: dir.url, configuration: config)
        let stuck = try (0..<5).map { try courier.send(["stuck": $0], to: down) }
        var peak = 0
        for round in 0..<40 {
            for i in 0..<100 {
                try courier.send(["round": round, "i": i, "pad": String(repeating: "p", count: 100)], to: inbox)
            }
            await courier.settle()
            peak = max(peak, courier.log.sizeBytes)
        }
        #expect(courier.pendingCount == 5)
        let compactions = courier.compactionCount
        #expect(compactions > 3, "4,000 messages through 16 KiB segments must compact")
        // Live data: 5 small messages. Bound: one segment being filled, one sealed, slack.
        #expect(peak <= 3 * config.segmentSizeBytes, "peak \(peak) bytes")
        await courier.close()
        let reopened = try Courier(
            directory: dir.url,
            configuration: testConfiguration(clock: ManualClock(),
                                             transport: ScriptedTransport { _ in .response(status: 500) }))
        #expect(Set(reopened.scheduledStates.keys) == Set(stuck))
        await reopened.close()
    }

    /// A log that is all delivered records is compacted at open, on the I/O queue; `settle()`
    /// waits for that compaction, so a test that settles and then looks at the log sees it done.
    /// A compaction an outcome starts runs on the I/O queue, not in the delivery slot that
    /// heard the outcome: with one slot, and a compaction stopped at its fsync, messages still go
    /// (a slot held for it stalled delivery until its file work was done).
    @Test(.timeLimit(.minutes(1))) func aCompactionUnderWayHoldsNoDeliverySlot() async throws {
        let fs = SimulatedFileSystem()
        var config = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        config.fileSystem = fs
        config.useSmallestSegments()
        config.concurrencyLimit = .fixed
        config.maximumConcurrentDeliveries = 1
        let courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        fs.pauseSyncs()
        // Bounded: 4 KiB segments roll every few dozen of these, and each delivered roll is
        // worth compacting.
        for i in 0..<2_000 where !courier.core.diagnostics.compacting {
            _ = try courier.send(["n": i, "pad": String(repeating: "x", count: 100)], to: inbox)
            await Task.yield()
        }
        #expect(courier.core.diagnostics.compacting, "a compaction started, and waits for its fsync")
        let more = try (0..<5).map { try courier.send(["more": $0], to: inbox) }
        for id in more { try await courier.delivered(id) }
        #expect(courier.core.diagnostics.compacting, "delivered while the compaction waited")
        fs.resumeSyncs()
        await courier.close()
    }

    @Test func settleWaitsForTheCompactionPlannedAtOpen() async throws {
        let scratch = TemporaryDirectory()
        let transport = ScriptedTransport { _ in .response(status: 200) }
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.segmentSizeBytes = 16 << 10
        config.maximumMessageBytes = 1024
        config.isCompactionEnabled = false
        let courier = try Courier(directory: scratch.url, configuration: config)
        try courier.sendRollingAtSegmentSize((0..<400).map { ["i": $0, "pad": String(repeating: "p", count: 100)] },
                                             to: inbox)
        await courier.settle()
        #expect(courier.pendingCount == 0)
        await courier.close()
        let files = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
        #expect(files.filter { $0.hasSuffix(".wal") }.count > 2, "\(files)")

        config.isCompactionEnabled = true
        let reopened = try Courier(directory: scratch.url, configuration: config)
        await reopened.settle()
        #expect(reopened.compactionCount == 1, "settle() returned before the compaction planned at open ended")
        await reopened.close()
    }

    /// A compaction found not worth it is weighed again after the next roll or
    /// `compactionThreshold` resolutions, not on every outcome: each look scans every pending
    /// message, so looking per outcome made each delivery O(pending) under the core's lock
    /// (40,000 messages through a no-op transport spent over half their time there).
    @Test func aCompactionNotWorthItIsWeighedOncePerThresholdNotPerOutcome() async throws {
        let transport = ScriptedTransport {
            $0.url.host == "down.example" ? .response(status: 500) : .response(status: 200)
        }
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.segmentSizeBytes = 16 << 10
        config.maximumMessageBytes = 1024
        config.compactionThreshold = 20
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url, configuration: config)
        // Pinned: 200 pending messages of ~450 bytes after LZ4 (random base64 does not shrink
        // much), more than everything else the log will hold: compacting is never worth it.
        var random = SeededRandom(seed: 9)
        for i in 0..<200 {
            let pad = Data((0..<450).map { _ in UInt8(truncatingIfNeeded: random.next()) }).base64EncodedString()
            try courier.send(["i": i, "pad": pad], to: down)
        }
        await courier.settle()
        let checksBefore = courier.core.diagnostics.compactionChecks
        let segmentsBefore = courier.log.segmentNames.count
        #expect(segmentsBefore >= 2, "the pinned records lie in sealed segments")
        for i in 0..<400 { try courier.send(["i": i], to: inbox) }
        await courier.settle()
        #expect(courier.pendingCount == 200)
        #expect(courier.compactionCount == 0)
        let looks = courier.core.diagnostics.compactionChecks - checksBefore
        let rolls = courier.log.segmentNames.count - segmentsBefore  // nothing is forgotten: only rolls
        #expect(looks <= 400 / 20 + rolls + 1, "\(looks) looks for 400 deliveries and \(rolls) rolls")
        await courier.close()
    }

    /// Snapshots are appended in batches, and a batch must fit one segment: pinned messages of
    /// nearly a segment each still compact (a review found chunks of up to 1.25 segments, whose
    /// batch the log refused every time, so the log only grew).
    @Test func pinnedMessagesNearlyASegmentLargeStillCompact() async throws {
        let transport = ScriptedTransport {
            $0.url.host == "down.example" ? .response(status: 500) : .response(status: 200)
        }
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.segmentSizeBytes = 64 << 10
        config.maximumMessageBytes = 60_000
        config.maximumStorageBytes = 1 << 20
        config.isCompactionEnabled = false  // compacted by hand below
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url, configuration: config)
        courier.pause()
        var random = SeededRandom(seed: 5)
        let noise = { (n: Int) in Data((0..<n).map { _ in UInt8(truncatingIfNeeded: random.next()) }) }
        let big = try [16_200, 50_000].map {
            try courier.send(data: noise($0), contentType: "application/octet-stream", to: down)
        }
        // Roll until both lie in sealed segments, below the compactor's floor.
        for i in 0..<200 where courier.log.segmentNames.count < 3 {
            try courier.send(["i": i, "pad": String(repeating: "p", count: 900)], to: down)
        }
        let plan = try #require(courier.core.planCompaction(force: true))
        #expect(Set(plan.pinned.map(\.id)).isSuperset(of: big))
        let written = Result { () throws(LogError) in try courier.core.writeSnapshots(plan) }
        courier.core.handle(.compactionEnded(error: nil), at: courier.currentInstant()).run()
        #expect((try? written.get()) != nil, "\(written)")
        if (try? written.get()) != nil {  // as the compactor does: forget only after the snapshots
            try courier.log.sync()
            try courier.log.forget(below: plan.floor)
        }
        await courier.close()
        let reopened = try Courier(directory: courier.directory, configuration: config)
        #expect(Set(reopened.scheduledStates.keys).isSuperset(of: big))
        #expect(reopened.pendingCount == courier.pendingCount)
        await reopened.close()
    }

    /// A crash after each file-system step of a compaction reopens to the same pending set.
    @Test func aCrashAtAnyStepOfCompactionLosesNothingAndResurrectsNothing() async throws {
        var k = 0
        var finished = false
        while !finished && k < 200 {
            let fs = SimulatedFileSystem()
            let dir = URL(fileURLWithPath: "/courier")
            let transport = ScriptedTransport {
                $0.url.host == "down.example" ? .response(status: 500) : .response(status: 200)
            }
            var config = testConfiguration(clock: ManualClock(), transport: transport)
            config.fileSystem = fs
            config.useSmallestSegments()
            config.isCompactionEnabled = false
            let courier = try Courier(directory: dir, configuration: config)
            for i in 0..<3 { try courier.send(["stuck": i], to: down) }
            for i in 0..<60 { try courier.send(["ok": i], to: inbox) }
            await courier.settle()
            try courier.log.sync()
            let before = courier.scheduledStates
            #expect(before.count == 3)
            #expect(courier.log.segmentNames.count > 2)
            let start = fs.operationCount
            fs.stopAfter(operations: k)
            courier.compactNowForTesting()
            finished = fs.operationCount - start <= k
            fs.crash()
            var reopen = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
            reopen.fileSystem = fs
            reopen.now = { wallStart.addingTimeInterval(-60) }  // nothing due: compare as replayed
            let after = try Courier(directory: dir, configuration: reopen)
            #expect(after.scheduledStates == before, "crash after \(k) operations")
            await after.close()
            k += 1
        }
        #expect(finished)
        #expect(k > 8, "snapshots, a sync and several deletions: many crash points (\(k))")
    }
}

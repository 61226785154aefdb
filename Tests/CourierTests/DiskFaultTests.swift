@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// The disk failing under a running courier, through `SimulatedFileSystem`: a full disk at
/// every step that writes (append, segment creation, compaction), a failed fsync, an
/// unreadable segment, segments removed or cut by hand between runs, a read-only volume.
/// What holds in each case: the caller gets a typed error, never a trap; once the fault is gone
/// the courier works again; nothing already acknowledged is lost.
@Suite struct DiskFaultTests {
    let directory = URL(fileURLWithPath: "/c")

    func configuration(_ fs: SimulatedFileSystem, _ transport: ScriptedTransport) -> Courier.Configuration {
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.fileSystem = fs
        config.useSmallestSegments()
        return config
    }

    /// Reopens the directory a minute "earlier", so nothing is due: the pending set as replayed.
    func pendingAfterReopen(_ fs: SimulatedFileSystem) async throws -> (Set<MessageID>, RecoveryReportSummary) {
        var reopen = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        reopen.fileSystem = fs
        reopen.useSmallestSegments()
        reopen.now = { wallStart.addingTimeInterval(-60) }
        let courier = try Courier(directory: directory, configuration: reopen)
        let pending = await Set(courier.pendingMessages().map(\.id))
        let summary = RecoveryReportSummary(isClean: courier.recovery.isClean, text: courier.recovery.summary)
        await courier.close()
        return (pending, summary)
    }

    /// `.always`, at most `bound` pending, tag "t" dropped at the bound; paused.
    func alwaysAtTheBound(_ fs: SimulatedFileSystem, _ bound: Int) throws -> Courier {
        var config = configuration(fs, held())
        config.durability = .always
        config.maximumPendingMessages = bound
        config.whenFull["t"] = .dropOldest
        let courier = try Courier(directory: directory, configuration: config)
        courier.pause()
        return courier
    }

    func held() -> ScriptedTransport {
        let transport = ScriptedTransport()
        transport.holdResponses = true
        return transport
    }

    /// The next segment is created ahead, off the core's lock: a full disk then refuses no
    /// send (the active segment grows meanwhile), and a later try makes it.
    @Test func aFullDiskWhilePreparingTheNextSegmentRefusesNoSend() async throws {
        let fs = SimulatedFileSystem()
        let courier = try Courier(directory: directory, configuration: configuration(fs, held()))
        // 4 KiB segments: a roll comes within a few dozen sends; make the next creation fail.
        fs.inject(.error(28), on: .create)
        // Each send after the preparation it started (the transport holds every attempt, so settle()
        // would wait forever): the retried preparation is then ready before the segment is full.
        let kept = try courier.sendRollingAtSegmentSize(
            (0..<60).map { ["n": $0, "pad": String(repeating: "x", count: 100)] }, to: inbox)
        #expect(fs.count(of: .create) >= 2, "the failed preparation was tried again")
        #expect(courier.log.segmentNames.count > 1, "and the log rolled onto the segment made then")
        await courier.close()
        let (pending, recovery) = try await pendingAfterReopen(fs)
        #expect(pending == Set(kept))
        #expect(recovery.isClean, "\(recovery.text)")
    }

    @Test func aFullDiskAtAppendRefusesOneSendAndKeepsTheRest() async throws {
        let fs = SimulatedFileSystem()
        let courier = try Courier(directory: directory, configuration: configuration(fs, held()))
        let before = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        fs.inject(.error(28), on: .write)
        let refused = Result { () throws(CourierError) in try courier.send(["n": 3], to: inbox) }
        guard case .failure(let error) = refused else { Issue.record("a send on a full disk returned"); return }
        #expect(error.code == .storageFull)
        let after = try courier.send(["n": 4], to: inbox)
        await courier.close()
        let (pending, recovery) = try await pendingAfterReopen(fs)
        #expect(pending == Set(before + [after]))
        #expect(recovery.isClean, "\(recovery.text)")
    }

    /// A failed fsync is never retried (the kernel may have dropped the dirty pages): the log
    /// refuses further writes until it is reopened, and reopening finds what was acknowledged.
    @Test func aFailedFsyncFailsTheLogUntilReopenedAndLosesNothingAcknowledged() async throws {
        let fs = SimulatedFileSystem()
        var config = configuration(fs, held())
        config.durability = .always
        let courier = try Courier(directory: directory, configuration: config)
        let before = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        fs.inject(.error(28), on: .sync)
        let failed = Result { () throws(CourierError) in try courier.send(["n": 3], to: inbox) }
        guard case .failure(let error) = failed else { Issue.record("a send whose fsync failed returned"); return }
        #expect(error.code == .storageFailed && error.messageID != nil)
        let next = Result { () throws(CourierError) in try courier.send(["n": 4], to: inbox) }
        guard case .failure(let refused) = next else { Issue.record("a failed log accepted a send"); return }
        #expect(refused.code == .storageFailed)
        await courier.close()
        let (pending, _) = try await pendingAfterReopen(fs)
        #expect(pending.isSuperset(of: before))
        let again = try Courier(directory: directory, configuration: configuration(fs, held()))
        _ = try again.send(["n": 5], to: inbox)
        await again.close()
    }

    /// Under `.always`, a send whose fsync fails is undone whole: the message it would have
    /// replaced, or dropped at `maximumPendingMessages`, stays pending, unseen by events and
    /// callbacks.
    @Test(arguments: [true, false])
    func aSendWhoseFsyncFailsWithdrawsNothing(replacing: Bool) async throws {
        let fs = SimulatedFileSystem()
        let courier = try alwaysAtTheBound(fs, 1)
        let events = EventLog(courier.events())
        let called = Locked(false)
        let old = try courier.send(
            ["n": 1], to: inbox, tags: ["t"], replacing: "k", onAbandoned: { _, _ in called.withLock { $0 = true } })
        fs.inject(.error(5), on: .sync)
        let failed = Result { () throws(CourierError) in
            try courier.send(["n": 2], to: inbox, replacing: replacing ? "k" : nil)
        }
        guard case .failure(let error) = failed else { Issue.record("a send whose fsync failed returned"); return }
        #expect(error.code == .storageFailed)
        #expect(await courier.pendingMessages().map(\.id) == [old], "nothing was withdrawn")
        await courier.close()
        await events.finish()
        #expect(
            !events.events.contains {
                [.cancelled(old), .abandoned(old, attempts: 0, reason: .dropped(tag: "t"))]
                    .contains($0)
            }, "\(events.events)")
        #expect(!called.withLock { $0 }, "no callback")
    }

    /// Under `.always`, a message a send withdraws is gone for every decision while that send
    /// waits for its fsync: a second send in that window drops another message, never the same
    /// one, so the bound holds once both are durable; and each dropped message does go then.
    @Test func underAlwaysTwoSendsInOneFsyncWindowDropTwoMessages() async throws {
        let fs = SimulatedFileSystem()
        let courier = try alwaysAtTheBound(fs, 2)
        let old = try (0..<2).map { try courier.send(["n": $0], to: inbox, tags: ["t"]) }
        let records = courier.log.nextSequence
        fs.pauseSyncs()
        async let first = onThread { try courier.send(["n": 2], to: inbox) }
        #expect(await fs.waitForAPausedSync())
        async let second = onThread { try courier.send(["n": 3], to: inbox) }
        // Bounded: the second send's section appends its two records within a few turns.
        for _ in 0..<5_000 where courier.log.nextSequence < records + 4 { try await Task.sleep(for: .milliseconds(1)) }
        #expect(courier.log.nextSequence == records + 4, "each send logged its message and one drop")
        fs.resumeSyncs()
        let new = try await [first, second]
        #expect(Set(await courier.pendingMessages().map(\.id)) == Set(new), "both old ones went, once each")
        for id in old { await #expect(throws: CourierError.self) { try await courier.delivered(id) as ServerAnswer } }
        await courier.close()
    }

    /// Compaction needs room for the snapshots of pinned messages: on a full disk it fails,
    /// says so in `events`, deletes nothing, leaves `send` working, and succeeds once space
    /// returns.
    @Test func aFullDiskDuringCompactionLosesNothingAndCompactionResumes() async throws {
        let fs = SimulatedFileSystem()
        let transport = ScriptedTransport { request in
            request.body.count > 60 ? .response(status: 500) : .response(status: 200)  // padded ones stay pinned
        }
        var config = configuration(fs, transport)
        config.retry = RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600), jitter: .none)
        config.isCompactionEnabled = false  // this test decides when compaction runs
        let courier = try Courier(directory: directory, configuration: config)
        let events = EventLog(courier.events())
        let pinned = try (0..<4).map {
            try courier.send(["pinned": $0, "pad": String(repeating: "p", count: 80)], to: inbox)
        }
        try courier.sendRollingAtSegmentSize((0..<120).map { ["n": $0] }, to: inbox)
        await courier.settle()
        courier.pause()  // what is pending now stays pending, for the reopen below
        let segmentsBefore = fs.allPaths().filter { $0.hasSuffix(".wal") }

        fs.inject(.error(28), on: .write)
        courier.compactNowForTesting()
        #expect(courier.compactionCount == 0, "the compaction whose snapshot write failed did not count")
        #expect(fs.allPaths().filter { $0.hasSuffix(".wal") }.count >= segmentsBefore.count, "nothing was deleted")
        let afterFailure = try courier.send(["n": 1000], to: inbox)
        courier.compactNowForTesting()
        #expect(courier.compactionCount == 1, "compaction runs once space is back")
        #expect(fs.allPaths().filter { $0.hasSuffix(".wal") }.count < segmentsBefore.count, "and reclaims segments")
        await courier.close()
        await events.finish()
        #expect(
            events.events.contains {
                if case .storageFailed(let e) = $0 { e.message.contains("compaction") } else { false }
            },
            "the failed compaction was reported")
        let (pending, recovery) = try await pendingAfterReopen(fs)
        #expect(pending == Set(pinned + [afterFailure]), "the pinned messages survive both compactions")
        #expect(recovery.isClean, "\(recovery.text)")
    }

    /// An unreadable segment delays the messages in it; it does not lose them.
    @Test func aReadErrorDelaysAnAttemptAndTheMessageIsDeliveredLater() async throws {
        let fs = SimulatedFileSystem()
        let clock = ManualClock()
        let transport = ScriptedTransport()
        var config = testConfiguration(clock: clock, transport: transport)
        config.fileSystem = fs
        let courier = try Courier(directory: directory, configuration: config)
        courier.pause()
        // More than the recent-state ring holds, so the first ones must be read back.
        let ids = try (0..<600).map { try courier.send(["n": $0], to: inbox) }
        fs.inject(.error(5), on: .read)
        courier.resume()
        for _ in 0..<40 where courier.pendingCount > 0 {
            await courier.settle()
            await clock.advance(by: .seconds(400))
        }
        #expect(courier.pendingCount == 0)
        let delivered = Set(transport.requests.map(\.messageID))
        #expect(delivered == Set(ids), "every message, the one whose read failed included")
        await courier.close()
    }

    /// 80 messages sent and the courier closed; returns their ids and a sealed segment in the
    /// middle of the log (the second of at least four), for a test to damage by hand.
    func closedLogWithASealedSegment(_ fs: SimulatedFileSystem) async throws -> ([MessageID], String) {
        let courier = try Courier(directory: directory, configuration: configuration(fs, held()))
        let ids = try courier.sendRollingAtSegmentSize((0..<80).map { ["n": $0] }, to: inbox)
        await courier.close()
        let segments = fs.allPaths().filter { $0.hasSuffix(".wal") }.sorted()
        try #require(segments.count >= 4)
        return (ids, segments[1])
    }

    @Test func aSegmentRemovedByHandIsReportedAndTheOthersSurvive() async throws {
        let fs = SimulatedFileSystem()
        let (ids, victim) = try await closedLogWithASealedSegment(fs)
        let lostIDs = Set(try Self.ids(in: fs.contents(of: victim)!, named: victim))
        try fs.removeFile(atPath: victim)
        let (pending, recovery) = try await pendingAfterReopen(fs)
        #expect(!recovery.isClean, "a missing segment is reported")
        #expect(pending == Set(ids).subtracting(lostIDs), "exactly the removed segment's messages are gone")
    }

    @Test func aSegmentCutByHandKeepsEveryRecordBeforeTheCut() async throws {
        let fs = SimulatedFileSystem()
        let (ids, victim) = try await closedLogWithASealedSegment(fs)
        let bytes = fs.contents(of: victim)!
        let cut = Array(bytes.prefix(bytes.count / 2))
        let kept = Set(try Self.ids(in: cut, named: victim)), whole = Set(try Self.ids(in: bytes, named: victim))
        fs.setContents(cut, of: victim)
        let (pending, recovery) = try await pendingAfterReopen(fs)
        #expect(!recovery.isClean, "a cut sealed segment is reported")
        #expect(pending == Set(ids).subtracting(whole.subtracting(kept)), "records before the cut survive")
    }

    @Test func aReadOnlyVolumeIsATypedErrorAtOpen() async throws {
        let fs = SimulatedFileSystem()
        fs.inject(.error(30), on: .create)  // EROFS
        let result = Result { () throws(CourierError) in
            try Courier(
                directory: directory,
                configuration: configuration(fs, held()))
        }
        guard case .failure(let error) = result else { Issue.record("opened a read-only volume"); return }
        #expect([.storageFailed, .storageFull].contains(error.code), "\(error)")
        #expect(error.message.contains("30") || error.message.lowercased().contains("read-only"), "\(error)")
    }

    /// The message ids of the records that a reader accepts in a segment's bytes.
    static func ids(in segment: [UInt8], named name: String) throws -> [MessageID] {
        let fs = SimulatedFileSystem()
        try fs.createDirectory(atPath: "/scan")
        fs.setContents(segment, of: "/scan/" + name.split(separator: "/").last!)
        var ids: [MessageID] = []
        _ = try LogReader(directory: "/scan", fileSystem: fs).read { record in
            if record.kind == .enqueued, let id = Event.messageID(in: Array(record.body)) { ids.append(id) }
        }
        return ids
    }
}

struct RecoveryReportSummary {
    var isClean: Bool
    var text: String
}

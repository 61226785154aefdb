@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// Damage found when opening is never silent: `recovery` holds it, and every `events` stream
/// begins with a `.storageFailed` that says so (issue 7: replay's report used to be dropped).
@Suite struct RecoveryVisibilityTests {
    @Test func damageAndUndecodableRecordsFoundByReplayAreReported() async throws {
        let fs = SimulatedFileSystem()
        var config = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        config.fileSystem = fs
        config.useSmallestSegments()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        config.transport = transport
        let dir = URL(fileURLWithPath: "/c")
        let first = try Courier(directory: dir, configuration: config)
        for i in 0..<40 { try first.send(["n": i, "text": "message number \(i)"], to: inbox) }
        await first.close()
        // A record a newer version might write: valid to the log, meaningless to this Courier.
        let log = try WriteAheadLog(directory: "/c", configuration: config.logConfiguration(), fileSystem: fs)
        try log.append([0xFF, 1, 2, 3], kind: .enqueued)
        try log.close()
        // One flipped bit in the middle of the oldest segment.
        let oldest = "/c/" + SegmentName.make(firstSequence: 1)
        var bytes = try #require(fs.contents(of: oldest))
        bytes[bytes.count / 2] ^= 0x10
        fs.setContents(bytes, of: oldest)

        let second = try Courier(directory: dir, configuration: config)
        let recovery = second.recovery
        #expect(!recovery.isClean)
        #expect(recovery.damaged.count == 1)
        #expect(recovery.missingSequences == 1)
        #expect(recovery.undecodableRecords.count == 1)
        #expect(second.pendingCount == 39, "only the damaged record's message is lost")
        var iterator = second.events().makeAsyncIterator()
        guard case .storageFailed(let error)? = await iterator.next() else {
            Issue.record("the first event must report the damage")
            return
        }
        #expect(error.code == .storageFailed)
        #expect(error.message.contains("damage") && error.message.contains("not understood"), "\(error)")
        await second.close()
    }

    @Test func aCleanLogStartsNoStreamWithAWarning() async throws {
        let dir = TemporaryDirectory()
        let config = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        let first = try Courier(directory: dir.url, configuration: config)
        try first.send(["n": 1], to: inbox)
        await first.close()
        let second = try Courier(directory: dir.url, configuration: config)
        #expect(second.recovery.isClean)
        let events = EventLog(second.events())
        await second.waitUntilIdle()
        await second.close()
        await events.finish()
        #expect(!events.events.contains { if case .storageFailed = $0 { true } else { false } })
    }
}

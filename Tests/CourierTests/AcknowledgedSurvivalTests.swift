@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// The property behind Courier's one promise (issue 7): for any configuration within the
/// documented bounds and any bodies within `maximumMessageBytes`, every message whose `send`
/// returned is pending after the process ends at any point and the directory is reopened.
@Suite struct AcknowledgedSurvivalTests {
    /// A random configuration within the documented bounds (`Configuration.problems` is empty).
    static func randomConfiguration(_ rng: inout SeededRandom) -> Courier.Configuration {
        var c = Courier.Configuration()
        c.allowsPurgeableDirectory = true
        let sizes = [Format.minimumSegmentBytes, 4097, 8192, 16_384, 65_536, 100_000, 262_144, 1 << 20]
        c.segmentSizeBytes = sizes.randomElement(using: &rng)!
        var log = WriteAheadLog.Configuration()
        log.segmentSizeBytes = c.segmentSizeBytes
        let largest = log.maximumRecordBytes - Event.stateOverheadBytes - Courier.Configuration.envelopeAllowanceBytes
        c.maximumMessageBytes = Int.random(in: 0...largest, using: &rng)
        c.maximumStorageBytes = 64 << 20
        c.durability = [.never, .interval(.milliseconds(100)), .always].randomElement(using: &rng)!
        c.maximumConcurrentDeliveries = Int.random(in: 1...8, using: &rng)
        return c
    }

    /// A body of 0…`maximum` bytes: empty, compressible text, or random (incompressible) bytes.
    static func randomBody(maximum: Int, _ rng: inout SeededRandom) -> Data {
        let size = [0, maximum, Int.random(in: 0...maximum, using: &rng)].randomElement(using: &rng)!
        if Bool.random(using: &rng) {
            return Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        return Data(String(repeating: "abcd", count: size / 4 + 1).utf8.prefix(size))
    }

    @Test(arguments: 0..<24)
    func everyAcknowledgedSendIsPendingAfterTheProcessEndsAnywhere(seed: UInt64) async throws {
        var rng = SeededRandom(seed: 0xC0_0000 + seed)
        let fs = SimulatedFileSystem()
        let held = ScriptedTransport()
        held.holdResponses = true
        var config = Self.randomConfiguration(&rng)
        #expect(config.problems.isEmpty, "\(config.problems)")
        config.fileSystem = fs
        config.transport = held
        config.clock = ManualClock()
        config.makeMessageID = SequentialMessageIDs().next
        let courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        let count = Int.random(in: 1...30, using: &rng)
        // Where the process ends: after some sends, or with the disk stopping mid-send (every
        // later write and fsync fails, as a dying process's would).
        let stopAfterSends = Int.random(in: 0...count, using: &rng)
        var acknowledged: [MessageID] = []
        for i in 0..<count {
            if i == stopAfterSends && Bool.random(using: &rng) {
                fs.stopAfter(operations: Int.random(in: 0...3, using: &rng))
            }
            let body = Self.randomBody(maximum: config.maximumMessageBytes, &rng)
            switch Result(catching: { () throws(CourierError) in
                try courier.send(data: body, contentType: "application/octet-stream", to: inbox)
            }) {
            case .success(let id): acknowledged.append(id)
            case .failure(let error): #expect(error.code == .storageFailed, "seed \(seed): \(error)")
            }
        }
        let powerLoss = config.durability == .always && Bool.random(using: &rng)
        if powerLoss {
            // `.always` promises more: a power loss loses nothing acknowledged either, even
            // with half-written unsynced bytes left behind.
            let keep = Int.random(in: 0...64, using: &rng)
            fs.crash(keepingUnsyncedBytes: { _, unsynced in min(keep, unsynced) })
        } else {
            fs.killProcess()
        }

        var reopen = config
        reopen.now = { wallStart.addingTimeInterval(-3600) }  // nothing due: pending stays as replayed
        let again = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: reopen)
        let pending = await Set(again.pendingMessages().map(\.id))
        let lost = acknowledged.filter { !pending.contains($0) }
        #expect(lost.isEmpty, """
            seed \(seed), segment \(config.segmentSizeBytes), max message \(config.maximumMessageBytes), \
            \(config.durability), power loss \(powerLoss): lost \(lost.count) of \(acknowledged.count)
            """)
        #expect(again.recovery.isClean, "seed \(seed): \(again.recovery.summary)")
        await again.close()
        _ = courier
    }

    /// The weaker durabilities' promise under a power loss at a random point (mid-roll and
    /// mid-compaction included: 4 KiB segments, half the messages delivered at once so the
    /// compactor runs, and sometimes the disk stops mid-operation first): with `.never` and
    /// `.interval`, a message whose `send` returned and whose record was on stable storage at
    /// the cut (its sequence at most the log's durable point) is pending afterwards, unless the
    /// server accepted it; only what was never synced may be lost.
    @Test(arguments: 0..<16)
    func aPowerLossLosesOnlyWhatWasNeverSynced(seed: UInt64) async throws {
        var rng = SeededRandom(seed: 0x9A_0000 + seed)
        let fs = SimulatedFileSystem()
        let transport = ScriptedTransport { request in
            request.messageID.description.last!.hexDigitValue! % 2 == 0
                ? .response(status: 200) : .response(status: 500)
        }
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        config.useSmallestSegments()
        config.durability = seed % 2 == 0 ? .never : .interval(.milliseconds(Int64.random(in: 1...20, using: &rng)))
        config.fileSystem = fs
        config.transport = transport
        config.clock = ManualClock()
        config.retry = RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600))
        config.makeMessageID = SequentialMessageIDs().next
        let courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        let count = Int.random(in: 20...150, using: &rng)
        let stopAt = Int.random(in: 0..<(count * 2), using: &rng)  // past count: the disk never stops
        var acknowledged: [(id: MessageID, sequence: UInt64)] = []
        for i in 0..<count {
            if i == stopAt { fs.stopAfter(operations: Int.random(in: 0...6, using: &rng)) }
            switch Result(catching: { () throws(CourierError) in
                try courier.send(["n": i, "pad": String(repeating: "p", count: 40)], to: inbox)
            }) {
            // The record's sequence is at most the log's last one now (the engine may have
            // appended after it): a conservative bound.
            case .success(let id): acknowledged.append((id, courier.log.nextSequence - 1))
            case .failure(let error):
                #expect([.storageFailed, .storageFull].contains(error.code), "seed \(seed): \(error)")
            }
            if i % 10 == 0 { await courier.settle() }
        }
        // The dying process does nothing more, as a real one could not: its engine stops first,
        // or an attempt still running would append to (and roll a segment on) the rebooted disk
        // while the next process opens it. (Found under `make tsan`, whose slowdown let the
        // runners outlive the crash.)
        courier.pause()
        await courier.settle()
        let durable = courier.log.durableSequence
        let keep = Int.random(in: 0...64, using: &rng)
        fs.crash(keepingUnsyncedBytes: { _, unsynced in min(keep, unsynced) })

        let accepted = Set(
            transport.requests.filter { $0.messageID.description.last!.hexDigitValue! % 2 == 0 }.map(\.messageID))
        var reopen = config
        let held = ScriptedTransport()
        held.holdResponses = true
        reopen.transport = held
        reopen.now = { Date().addingTimeInterval(-7200) }  // nothing due: pending stays as replayed
        let again = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: reopen)
        let pending = await Set(again.pendingMessages().map(\.id))
        let synced = acknowledged.filter { $0.sequence <= durable && !accepted.contains($0.id) }
        let lost = synced.filter { !pending.contains($0.id) }
        #expect(lost.isEmpty, """
            seed \(seed), \(config.durability): lost \(lost.count) of \(synced.count) synced, acknowledged, \
            undelivered messages
            """)
        #expect(pending.isSubset(of: Set(acknowledged.map(\.id))), "seed \(seed): only acknowledged messages come back")
        await again.close()
        _ = courier
    }
}


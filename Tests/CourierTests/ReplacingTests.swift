@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// Replaceable messages (`send(…replacing:)`): a send withdraws the pending message with the same
/// key, by its own record, so only the newest of a presence, a location or a draft is sent.
@Suite struct ReplacingTests {
    func open(
        _ directory: URL, _ transport: ScriptedTransport = ScriptedTransport(),
        edit: (inout Courier.Configuration) -> Void = { _ in }
    ) throws -> Courier {
        var configuration = testConfiguration(clock: ManualClock(), transport: transport)
        edit(&configuration)
        return try Courier(directory: directory, configuration: configuration)
    }

    func code(_ body: () async throws -> Void) async -> CourierError.Code? {
        do {
            try await body()
            return nil
        } catch let error as CourierError { return error.code } catch { return nil }
    }

    @Test func aSendWithAKeyWithdrawsThePendingMessageWithItAndOnlyThatOne() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        let events = EventLog(courier.events())
        courier.pause()
        let first = try courier.send(["at": 1], to: inbox, replacing: "presence")
        let draft = try courier.send(["text": "h"], to: inbox, replacing: "draft:7")
        let plain = try courier.send(["n": 1], to: inbox)
        let records = courier.log.nextSequence
        let newest = try courier.send(["at": 2], to: inbox, replacing: "presence")
        #expect(courier.log.nextSequence == records + 1, "one record: the new message's, which withdraws the old")
        #expect(await courier.pendingMessages().map(\.id) == [draft, plain, newest])
        #expect(await code { try await courier.delivered(first) } == .cancelled)
        courier.resume()
        await courier.waitUntilIdle()
        #expect(Set(transport.requests.map(\.messageID)) == [draft, plain, newest])
        await courier.close()
        await events.finish()
        #expect(events.events.contains(.cancelled(first)))
    }

    @Test func aReplacementHoldsAcrossReopensAndCompaction() async throws {
        let temporary = TemporaryDirectory()
        let ids = SequentialMessageIDs()  // one sequence for every open: no id comes twice
        // Every attempt fails (and the clock never moves): nothing is delivered when a reopen
        // starts the engine, before `pause()`.
        let failing = ScriptedTransport { _ in .response(status: 500) }
        let small: (inout Courier.Configuration) -> Void = {
            $0.transport = failing
            $0.useSmallestSegments()
            $0.makeMessageID = ids.next
        }
        var courier = try open(temporary.url, edit: small)
        courier.pause()
        _ = try courier.send(["at": 1], to: inbox, replacing: "location")
        let second = try courier.send(["at": 2], to: inbox, replacing: "location")
        await courier.close()

        courier = try open(temporary.url, edit: small)
        courier.pause()
        #expect(await courier.pendingMessages().map(\.id) == [second], "replay withdrew the first")
        // Other messages fill segments until `second`'s record is in a sealed one, which a
        // compaction re-snapshots: the snapshot keeps its key.
        let oldestSegment = courier.log.segmentNames.first
        for n in 0..<40 { _ = try courier.send(["n": n, "pad": String(repeating: "x", count: 200)], to: inbox) }
        courier.log.waitForRollWork()
        courier.compactNowForTesting()
        #expect(courier.compactionCountForTesting == 1)
        #expect(!courier.log.segmentNames.contains { $0 == oldestSegment }, "its enqueued record is gone")
        await courier.close()

        courier = try open(temporary.url, edit: small)
        courier.pause()
        #expect(await courier.pendingMessages().contains { $0.id == second })
        let third = try courier.send(["at": 3], to: inbox, replacing: "location")
        let pending = await courier.pendingMessages().map(\.id)
        #expect(!pending.contains(second) && pending.contains(third))
        await courier.close()
    }

    @Test func anAttemptUnderWayFinishesAndItsOutcomeIsIgnored() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let courier = try open(temporary.url, transport)
        let first = try courier.send(["at": 1], to: inbox, replacing: "presence")
        await transport.waitForRequests(1)
        let second = try courier.send(["at": 2], to: inbox, replacing: "presence")
        transport.holdResponses = false
        transport.release()
        try await courier.delivered(second)
        #expect(await code { try await courier.delivered(first) } == .cancelled)
        #expect(transport.requests.map(\.messageID) == [first, second], "the first's POST went on")
        await courier.close()
    }

    @Test func aReplacingSendNeedsNoRoomAtTheBound() async throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url) { $0.maximumPendingMessages = 1 }
        courier.pause()
        _ = try courier.send(["at": 1], to: inbox, replacing: "presence")
        let newest = try courier.send(["at": 2], to: inbox, replacing: "presence")
        #expect(await courier.pendingMessages().map(\.id) == [newest])
        #expect(await code { _ = try courier.send(["n": 1], to: inbox) } == .storageFull)
        await courier.close()
    }

    @Test(arguments: ["", String(repeating: "k", count: 1025)])
    func aReplacementKeyMustBeOneTo1024Bytes(key: String) async throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url)
        #expect(await code { _ = try courier.send(["n": 1], to: inbox, replacing: key) } == .invalidOrderingKey)
        await courier.close()
    }
}

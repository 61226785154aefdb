@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// Tags on messages (`send(…tags:)`), holds (`hold(tagged:)`, `release(tagged:)`) and
/// `cancel(tagged:)`: what they do to delivery, and that they are logged like every change.
@Suite struct TagTests {
    func open(
        _ directory: URL, _ transport: ScriptedTransport, clock: ManualClock = ManualClock(),
        edit: (inout Courier.Configuration) -> Void = { _ in }
    ) throws -> Courier {
        var configuration = testConfiguration(clock: clock, transport: transport)
        edit(&configuration)
        return try Courier(directory: directory, configuration: configuration)
    }

    @Test func aMessagesTagsReachPrepareRequestAndPendingMessages() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let seen = Locked<[Set<String>]>([])
        let courier = try open(temporary.url, transport) { c in
            c.prepareRequest = { request in seen.withLock { $0.append(request.tags) } }
        }
        courier.pause()
        let id = try courier.send(["n": 1], to: inbox, tags: ["account:7", "chat"])
        let pending = await courier.pendingMessages()
        #expect(pending.map(\.tags) == [["account:7", "chat"]])
        #expect(pending.map(\.isHeld) == [false])
        courier.resume()
        try await courier.delivered(id)
        #expect(seen.withLock { $0 } == [["account:7", "chat"]])
        #expect(transport.requests.first?.tags == ["account:7", "chat"])
        await courier.close()
    }

    @Test func invalidTagsAreRefusedAndNothingIsWritten() throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url, ScriptedTransport())
        let tooMany = Set((0...Courier.maximumTagCount).map { "t\($0)" })
        for tags: Set<String> in [[""], [String(repeating: "x", count: 257)], tooMany] {
            #expect(throws: CourierError.self) { try courier.send(["n": 1], to: inbox, tags: tags) }
            do { try courier.send(["n": 1], to: inbox, tags: tags) } catch { #expect(error.code == .invalidTags) }
        }
        #expect(courier.pendingCount == 0)
        #expect(courier.hold(tagged: "") == 0)
        #expect(courier.heldTags.isEmpty, "an invalid tag is not held")
    }

    @Test func aHeldTagKeepsItsMessagesAndLaterOnesUntilReleased() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        courier.pause()
        let early = try courier.send(["n": 1], to: inbox, tags: ["a"])
        let other = try courier.send(["n": 2], to: inbox, tags: ["b"])
        #expect(courier.hold(tagged: "a") == 1)
        let late = try courier.send(["n": 3], to: inbox, tags: ["a", "b"])
        courier.resume()
        try await courier.delivered(other)
        await courier.settle()
        #expect(transport.requests.map(\.messageID) == [other], "held messages are not attempted")
        #expect(courier.heldTags == ["a"])
        await courier.waitUntilIdle()  // returns: only held messages are left
        #expect(await courier.pendingMessages().map(\.isHeld) == [true, true])
        #expect(courier.release(tagged: "a") == 2)
        try await courier.delivered(early)
        try await courier.delivered(late)
        #expect(courier.heldTags.isEmpty)
        await courier.close()
    }

    @Test func aMessageWithTwoHeldTagsWaitsForBothReleases() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        courier.hold(tagged: "consent")
        courier.hold(tagged: "account:1")
        let id = try courier.send(["n": 1], to: inbox, tags: ["consent", "account:1"])
        courier.release(tagged: "consent")
        await courier.settle()
        #expect(transport.requests.isEmpty, "account:1 still holds it")
        courier.release(tagged: "account:1")
        try await courier.delivered(id)
        await courier.close()
    }

    @Test func aHeldMessageKeepsItsPlaceInItsOrderingKey() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        courier.hold(tagged: "draft")
        let first = try courier.send(["n": 1], to: inbox, orderingKey: "chat", tags: ["draft"])
        let second = try courier.send(["n": 2], to: inbox, orderingKey: "chat")
        await courier.settle()
        #expect(transport.requests.isEmpty, "the second waits behind the held first")
        courier.release(tagged: "draft")
        try await courier.delivered(second)
        #expect(transport.requests.map(\.messageID) == [first, second])
        await courier.close()
    }

    @Test func cancelTaggedWithdrawsEveryPendingMessageWithTheTag() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        let events = EventLog(courier.events())
        courier.pause()
        let mine = try (0..<5).map { try courier.send(["n": $0], to: inbox, tags: ["account:1"]) }
        let theirs = try courier.send(["n": 9], to: inbox, tags: ["account:2"])
        let waiter = Task { () -> CourierError.Code? in
            do { try await courier.delivered(mine[0]); return nil } catch let error as CourierError {
                return error.code
            } catch { return nil }
        }
        #expect(courier.cancel(tagged: "account:1") == 5)
        #expect(courier.cancel(tagged: "account:1") == 0)
        #expect(await waiter.value == .cancelled)
        let later = try courier.send(["n": 10], to: inbox, tags: ["account:1"])
        courier.resume()
        try await courier.delivered(theirs)
        try await courier.delivered(later)
        #expect(Set(transport.requests.map(\.messageID)) == [theirs, later])
        await courier.close()
        await events.finish()
        #expect(events.events.filter { if case .cancelled = $0 { true } else { false } }.count == 5)
    }

    @Test func holdsAndTagCancelsSurviveAReopen() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        courier.pause()
        let held = try courier.send(["n": 1], to: inbox, tags: ["consent"])
        let cancelled = try courier.send(["n": 2], to: inbox, tags: ["account:1"])
        courier.hold(tagged: "consent")
        courier.hold(tagged: "unused")
        courier.release(tagged: "unused")
        courier.cancel(tagged: "account:1")
        await courier.close()

        let again = try open(temporary.url, transport)
        #expect(again.heldTags == ["consent"])
        #expect(await again.pendingMessages().map(\.id) == [held])
        await again.settle()
        #expect(transport.requests.isEmpty)
        await #expect(throws: CourierError.self) { try await again.delivered(cancelled) }
        again.release(tagged: "consent")
        try await again.delivered(held)
        await again.close()

        let third = try open(temporary.url, transport)
        #expect(third.heldTags.isEmpty, "the release was logged too")
        await third.close()
    }

    @Test func aHoldOutlivesTheSegmentsACompactionForgets() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        // Only the compaction below runs: one the deliveries start could write the hold again at
        // the head of a segment, and the forced one would then keep it first.
        let courier = try open(temporary.url, transport) {
            $0.useSmallestSegments()
            $0.isCompactionEnabled = false
        }
        courier.hold(tagged: "consent")
        let held = try courier.send(["n": 0], to: inbox, tags: ["consent"])
        // Bounded: 120 small messages fill and roll several 4 KiB segments.
        let others = try courier.sendRollingAtSegmentSize(
            (1...120).map { ["n": $0, "pad": String(repeating: "x", count: 40)] }, to: inbox)
        for id in others { try await courier.delivered(id) }
        await courier.settle()
        courier.compactNowForTesting()
        #expect(courier.compactionCount > 0)
        var kinds: [RecordKind] = []
        _ = try LogReader(directory: temporary.url.path).read { kinds.append($0.kind) }
        #expect(kinds.first != .held, "the segment with the first held record is gone")
        #expect(kinds.contains(.held), "the compactor wrote the hold again")
        await courier.close()

        let again = try open(temporary.url, transport)
        #expect(again.heldTags == ["consent"])
        #expect(await again.pendingMessages().map(\.id) == [held])
        await again.close()
    }

    @Test func aHeldMessageIsNeverHandedOff() async throws {
        let server = BackgroundHandOffTests.Server()
        let app = SimulatedApp(server: server.transport, configuration: BackgroundHandOffTests.configuration())
        app.hearsFirstAnswersBeforeSuspending = false
        await app.system.launch()
        let courier = try #require(app.courier)
        courier.pause()
        courier.hold(tagged: "consent")
        let held = try courier.send(["n": 1], to: inbox, tags: ["consent"])
        let free = try courier.send(["n": 2], to: inbox)
        await app.enterBackground()
        #expect(courier.handedOffCount == 1)
        await app.system.advance(by: .seconds(60))
        #expect(server.transport.requests.map(\.messageID) == [free])
        #expect(await courier.pendingMessages().map(\.id) == [held])
    }
}

@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// An outbox that does not only grow: `cancelAll()` for logout and erasure, a bound on the
/// pending count (`maximumPendingMessages`), and per tag what a send does at it (`whenFull`).
@Suite struct BoundedOutboxTests {
    func open(
        _ directory: URL, _ transport: ScriptedTransport = ScriptedTransport(),
        edit: (inout Courier.Configuration) -> Void = { _ in }
    ) throws -> Courier {
        var configuration = testConfiguration(clock: ManualClock(), transport: transport)
        edit(&configuration)
        return try Courier(directory: directory, configuration: configuration)
    }

    func code(_ body: () throws -> some Any) -> CourierError.Code? {
        do {
            _ = try body()
            return nil
        } catch let error as CourierError { return error.code } catch { return nil }
    }

    @Test func cancelAllWithdrawsEveryPendingMessageForGoodAndLaterSendsGoOn() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        let events = EventLog(courier.events())
        courier.pause()
        let withdrawn = try (0..<3).map { try courier.send(["n": $0], to: inbox, tags: $0 == 1 ? ["t"] : []) }
        let waiter = Task { () -> CourierError.Code? in
            do { try await courier.delivered(withdrawn[0]); return nil } catch let error as CourierError {
                return error.code
            } catch { return nil }
        }
        #expect(courier.cancelAll() == 3)
        #expect(courier.cancelAll() == 0, "nothing left")
        #expect(await waiter.value == .cancelled)
        let later = try courier.send(["n": 9], to: inbox)
        courier.resume()
        try await courier.delivered(later)
        #expect(transport.requests.map(\.messageID) == [later])
        await courier.close()
        await events.finish()
        let cancelled = events.events.filter { if case .cancelled = $0 { true } else { false } }
        #expect(cancelled == withdrawn.map { .cancelled($0) })
        #expect(courier.cancelAll() == 0, "closed")

        let again = try open(temporary.url, transport)
        #expect(await again.pendingMessages().isEmpty, "the cancellations were logged")
        await again.close()
    }

    @Test func atTheBoundASendThrowsStorageFullAndWritesNothing() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport) { $0.maximumPendingMessages = 2 }
        courier.pause()
        let first = try courier.send(["n": 1], to: inbox)
        _ = try courier.send(["n": 2], to: inbox, tags: ["analytics"])
        let records = courier.log.nextSequence
        #expect(code { try courier.send(["n": 3], to: inbox, tags: ["analytics"]) } == .storageFull)
        #expect(courier.log.nextSequence == records, "nothing was written")
        courier.resume()
        try await courier.delivered(first)
        #expect(code { try courier.send(["n": 4], to: inbox) } == nil, "room again once one is delivered")
        await courier.close()
    }

    @Test func atTheBoundAnySendDropsTheOldestMessageOfADropOldestTagDurably() async throws {
        let temporary = TemporaryDirectory()
        let abandoned = Locked<[(MessageID, CourierError.Code)]>([])
        let courier = try open(temporary.url) { c in
            c.maximumPendingMessages = 3
            c.whenFull = ["analytics": .dropOldest, "chat": .refuse]
        }
        let events = EventLog(courier.events())
        courier.pause()
        let oldest = try courier.send(
            ["n": 1], to: inbox, tags: ["analytics"],
            onAbandoned: { id, error in abandoned.withLock { $0.append((id, error.code)) } })
        let chat = try courier.send(["n": 2], to: inbox, tags: ["chat"])
        let newer = try courier.send(["n": 3], to: inbox, tags: ["analytics"])
        let chat2 = try courier.send(["n": 4], to: inbox, tags: ["chat"])
        #expect(await courier.pendingMessages().map(\.id) == [chat, newer, chat2], "a chat send dropped analytics")
        #expect(abandoned.withLock { $0.map(\.0) } == [oldest] && abandoned.withLock { $0.map(\.1) } == [.abandoned])
        let untagged = try courier.send(["n": 5], to: inbox)
        #expect(await courier.pendingMessages().map(\.id) == [chat, chat2, untagged], "so did an untagged one")
        #expect(code { try courier.send(["n": 6], to: inbox, tags: ["analytics"]) } == .storageFull, "none left")
        await courier.close()
        await events.finish()
        let drop = events.events.firstIndex(of: .abandoned(oldest, attempts: 0, reason: .dropped(tag: "analytics")))
        #expect(drop != nil && events.events.firstIndex(of: .enqueued(chat2)) == drop.map { $0 - 1 }, "log order")

        let again = try open(temporary.url) { $0.maximumPendingMessages = 3 }
        #expect(await again.pendingMessages().map(\.id) == [chat, chat2, untagged], "the drops were logged")
        await #expect(throws: CourierError.self) { try await again.delivered(oldest) as ServerAnswer }
        #expect(code { try again.send(["n": 7], to: inbox, tags: ["analytics"]) } == .storageFull, "not listed here")
        await again.close()
    }

    @Test func aMessageWithARefuseTagIsNeverDroppedEvenWithADropOldestTag() async throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url) { c in
            c.maximumPendingMessages = 2
            c.whenFull = ["analytics": .dropOldest, "chat": .refuse]
        }
        courier.pause()
        let protected = try courier.send(["n": 1], to: inbox, tags: ["analytics", "chat"])
        _ = try courier.send(["n": 2], to: inbox, tags: ["analytics"])
        let plain = try courier.send(["n": 3], to: inbox)
        #expect(await courier.pendingMessages().map(\.id) == [protected, plain], "the younger, unprotected one went")
        #expect(code { try courier.send(["n": 4], to: inbox) } == .storageFull)
        await courier.close()
    }

    @Test func aDropOldestTagWithNoPendingMessageRefuses() throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url) { c in
            c.maximumPendingMessages = 1
            c.whenFull["analytics"] = .dropOldest
        }
        courier.pause()
        _ = try courier.send(["n": 1], to: inbox)
        #expect(code { try courier.send(["n": 2], to: inbox, tags: ["analytics"]) } == .storageFull)
    }

    @Test func aBoundBelowOneIsRefusedWhenOpening() throws {
        let temporary = TemporaryDirectory()
        #expect(code { try open(temporary.url) { $0.maximumPendingMessages = 0 } } == .invalidConfiguration)
    }
}

@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// `hold(tagged:)` and `cancel(tagged:)` through a power cut (`SimulatedFileSystem.crash()`:
/// every byte not fsynced is gone), under each durability setting, as `cancel(_:)` is in
/// `PowerLossTests`; and the account-switch recipe end to end.
@Suite struct TagDurabilityTests {
    func open(_ fs: SimulatedFileSystem, _ durability: Courier.Durability) throws -> Courier {
        try openForPowerCut(fs, durability)
    }

    /// After a power cut: the pending ids, and the tags held.
    func afterPowerLoss(_ fs: SimulatedFileSystem) async throws -> (pending: Set<MessageID>, held: [String]) {
        fs.crash()
        let again = try open(fs, .never)
        let pending = await Set(again.pendingMessages().map(\.id))
        let held = again.heldTags
        await again.close()
        return (pending, held)
    }

    /// Sends two accounts' messages, holds one tag and cancels the other (the cancel first with
    /// `holdLast`: the last call's own sync is what a power cut right after it tests).
    func holdAndCancel(_ courier: Courier, holdLast: Bool = false) throws
        -> (held: [MessageID], cancelled: [MessageID])
    {
        let held = try (0..<5).map { try courier.send(["n": $0], to: inbox, tags: ["account:1"]) }
        let cancelled = try (0..<5).map { try courier.send(["n": $0], to: inbox, tags: ["account:2"]) }
        courier.log.waitForRollWork()
        try courier.log.sync()  // the sends are durable: only the hold and the cancel are at stake
        if holdLast { #expect(courier.cancel(tagged: "account:2") == 5) }
        #expect(courier.hold(tagged: "account:1") == 5)
        if !holdLast { #expect(courier.cancel(tagged: "account:2") == 5) }
        return (held, cancelled)
    }

    @Test(arguments: [false, true])
    func alwaysKeepsAHoldAndATagCancelThroughAPowerCutRightAfterThem(holdLast: Bool) async throws {
        let fs = SimulatedFileSystem()
        let courier = try open(fs, .always)
        let (held, _) = try holdAndCancel(courier, holdLast: holdLast)
        let after = try await afterPowerLoss(fs)
        #expect(after.held == ["account:1"])
        #expect(after.pending == Set(held))
        _ = courier
    }

    @Test(.timeLimit(.minutes(1)))
    func intervalKeepsThemOnceTheIntervalsSyncCame() async throws {
        let fs = SimulatedFileSystem()
        let courier = try open(fs, .interval(.milliseconds(20)))
        let (held, _) = try holdAndCancel(courier)
        let last = courier.log.nextSequence - 1
        await courier.log.waitUntilDurable()
        #expect(courier.log.durableSequence >= last, "the interval's sync came")
        let after = try await afterPowerLoss(fs)
        #expect(after.held == ["account:1"])
        #expect(after.pending == Set(held))
        _ = courier
    }

    /// `.never`: durable once their segment is sealed; before that, a cut can undo both (as
    /// `.never` documents for every record of the newest segment).
    @Test func neverKeepsThemOnceTheirSegmentIsSealed() async throws {
        let fs = SimulatedFileSystem()
        let courier = try open(fs, .never)
        let (held, _) = try holdAndCancel(courier)
        var filler: [MessageID] = []
        let segments = courier.log.segmentNames.count
        // Bounded: a 4 KiB segment rolls within a few dozen of these sends.
        for _ in 0..<2_000 where courier.log.segmentNames.count <= segments {
            filler.append(try courier.send(["pad": String(repeating: "x", count: 100)], to: inbox))
        }
        courier.log.waitForRollWork()  // the sync after the roll
        let after = try await afterPowerLoss(fs)
        #expect(after.held == ["account:1"])
        #expect(after.pending.intersection(held) == Set(held))
        #expect(after.pending.isSubset(of: Set(held + filler)))
        _ = courier
    }

    @Test func neverCanLoseAHoldMadeInTheNewestSegment() async throws {
        let fs = SimulatedFileSystem()
        let courier = try open(fs, .never)
        _ = try holdAndCancel(courier)
        let after = try await afterPowerLoss(fs)
        #expect(after.held.isEmpty, "not synced: the documented loss of .never")
        _ = courier
    }

    /// The account-switch recipe ("Accounts and consent"): messages carry their account's
    /// tag, `prepareRequest` maps the tag to that account's token, and at a switch the old
    /// account's messages are held until it signs in again. The server answers 500 half the
    /// time, so messages of both accounts are retried across the switch.
    @Test func afterAnAccountSwitchNoMessageCarriesTheOtherAccountsToken() async throws {
        let temporary = TemporaryDirectory()
        let tokens = Locked<[String: String]>(["account:1": "token-1"])
        let random = Locked(SplitMix64(seed: 3))
        let transport = ScriptedTransport { _ in
            random.withLock { $0.next() } % 2 == 0 ? .response(status: 500) : .response(status: 200)
        }
        let clock = ManualClock()
        var config = testConfiguration(clock: clock, transport: transport)
        config.prepareRequest = { request in
            guard let account = request.tags.first(where: { $0.hasPrefix("account:") }),
                let token = tokens.withLock({ $0[account] })
            else { throw SignedOut() }  // no token: the attempt fails and is retried
            request.headers["Authorization"] = "Bearer " + token
        }
        let courier = try Courier(directory: temporary.url, configuration: config)
        let first = try (0..<20).map { try courier.send(["account": 1, "n": $0], to: inbox, tags: ["account:1"]) }
        await clock.advance(by: .milliseconds(500))
        // The switch: account 1 signs out, account 2 signs in.
        courier.hold(tagged: "account:1")
        tokens.withLock { $0 = ["account:2": "token-2"] }
        let second = try (0..<20).map { try courier.send(["account": 2, "n": $0], to: inbox, tags: ["account:2"]) }
        // Bounded: 600 steps of virtual time.
        for _ in 0..<600 {
            if await Set(courier.pendingMessages().map(\.id)).isDisjoint(with: second) { break }
            await clock.advance(by: .seconds(1))
        }
        let left = await courier.pendingMessages()
        #expect(left.allSatisfy { $0.isHeld && $0.tags == ["account:1"] }, "only account 1's held messages")
        #expect(!left.isEmpty, "some of account 1's messages were still pending at the switch")
        // Account 1 signs in again: its messages go with its token.
        tokens.withLock { $0 = ["account:1": "token-1"] }
        courier.release(tagged: "account:1")
        for _ in 0..<600 where courier.pendingCount > 0 { await clock.advance(by: .seconds(1)) }
        #expect(courier.pendingCount == 0)
        var wrong = 0
        for request in transport.requests {
            let body = try JSONSerialization.jsonObject(with: request.body) as? [String: Any]
            let account = body?["account"] as? Int
            if request.headers["Authorization"] != "Bearer token-\(account ?? 0)" { wrong += 1 }
        }
        #expect(wrong == 0, "requests carrying another account's token (or none)")
        #expect(transport.requests.count > first.count + second.count, "the 500s made retries across the switch")
        await courier.close()
    }

    struct SignedOut: Error {}
}

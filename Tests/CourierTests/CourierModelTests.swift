@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Observation
import Testing

/// The board behind the models: pure, so each rule is a plain check.
@Suite struct MessageBoardTests {
    let t0 = Date(timeIntervalSince1970: 1_790_000_000)
    let ids = (1...6).map { MessageID("00000000-0000-0000-0000-00000000000\($0)")! }

    func pending(_ n: Int, attempts: Int = 0, handedOff: Bool = false) -> PendingMessage {
        PendingMessage(
            id: ids[n], url: URL(string: "https://example.com/\(n)")!, body: Data("m\(n)".utf8), attempts: attempts,
            sentAt: t0, nextAttemptAt: t0.addingTimeInterval(30), isHandedOff: handedOff)
    }

    @Test func aMessageMovesFromQueuedThroughSendingAndWaitingToDelivered() {
        var board = MessageBoard(keepsResolved: 10)
        board.apply(.enqueued(ids[0]), now: t0)
        #expect(board.status(of: ids[0])?.state == .queued)
        board.apply(.attemptStarted(ids[0], number: 1), now: t0)
        #expect(board.status(of: ids[0])?.state == .sending(attempt: 1))
        let next = t0.addingTimeInterval(2)
        board.apply(.failed(ids[0], attempt: 1, outcome: .response(status: 500), nextAttemptAt: next), now: t0)
        #expect(board.status(of: ids[0])?.state == .waiting(until: next, after: .response(status: 500)))
        #expect(board.status(of: ids[0])?.attempts == 1 && board.pendingCount == 1)
        board.apply(.handedOff(ids[0], attempt: 2), now: t0)
        #expect(board.status(of: ids[0])?.state == .handedOff(attempt: 2))
        board.apply(.delivered(ids[0], attempts: 2), now: t0)
        #expect(board.status(of: ids[0])?.state == .delivered && board.status(of: ids[0])?.attempts == 2)
        #expect(board.pendingCount == 0, "delivered: listed, not pending")
    }

    @Test func aFailureThePolicyGaveUpOnLeavesTheStateToTheAbandonedEvent() {
        var board = MessageBoard(keepsResolved: 10)
        board.apply(.enqueued(ids[0]), now: t0)
        board.apply(.failed(ids[0], attempt: 1, outcome: .response(status: 400), nextAttemptAt: nil), now: t0)
        #expect(board.status(of: ids[0])?.state == .queued)
        board.apply(.abandoned(ids[0], attempts: 1, reason: .clientError(status: 400)), now: t0)
        #expect(board.status(of: ids[0])?.state == .abandoned(reason: .clientError(status: 400)))
    }

    @Test func loadingReplacesPendingMessagesAndKeepsResolvedOnes() {
        var board = MessageBoard(keepsResolved: 10)
        board.load([pending(0), pending(1)], asked: t0)
        board.apply(.delivered(ids[0], attempts: 1), now: t0)
        board.apply(.enqueued(ids[2]), now: t0)  // missed in a gap: the next load says it
        board.load([pending(1, attempts: 2), pending(3, handedOff: true)], asked: t0)
        #expect(board.messages.map(\.id) == [ids[0], ids[1], ids[3]])
        #expect(board.status(of: ids[0])?.state == .delivered)
        #expect(board.status(of: ids[1])?.state == .waiting(until: t0.addingTimeInterval(30), after: nil))
        #expect(board.status(of: ids[3])?.state == .handedOff(attempt: 1))
        #expect(board.status(of: ids[1])?.url == URL(string: "https://example.com/1"))
    }

    /// A message the model sent while the courier's list was being read is not in that list,
    /// and stays listed, with what the model knew of it.
    @Test func aMessageSentWhileTheListWasReadStaysListed() {
        var board = MessageBoard(keepsResolved: 10)
        let asked = t0
        board.didSend(ids[4], url: URL(string: "https://example.com/4")!, body: Data("m4".utf8), at: t0 + 0.5)
        board.load([pending(0)], asked: asked)
        #expect(board.messages.map(\.id) == [ids[4], ids[0]])
        #expect(board.status(of: ids[4])?.body == Data("m4".utf8))
    }

    @Test func onlyTheNewestResolvedMessagesStayListed() {
        var board = MessageBoard(keepsResolved: 2)
        board.load((0..<5).map { pending($0) }, asked: t0)
        for n in 0..<4 { board.apply(.delivered(ids[n], attempts: 1), now: t0) }
        #expect(board.messages.map(\.id) == [ids[2], ids[3], ids[4]])
        board.apply(.cancelled(ids[4]), now: t0)
        #expect(board.messages.map(\.id) == [ids[3], ids[4]])
        #expect(board.status(of: ids[4])?.state == .cancelled)
    }

    /// Nothing happens to a resolved message: a stray event cannot make it pending again, and
    /// the bound on resolved messages drops resolved ones only.
    @Test func aResolvedMessageStaysResolvedAndOnlyResolvedOnesAreDropped() {
        var board = MessageBoard(keepsResolved: 1)
        board.load((0..<3).map { pending($0) }, asked: t0)
        board.apply(.delivered(ids[0], attempts: 1), now: t0)
        board.apply(.attemptStarted(ids[0], number: 2), now: t0)
        #expect(board.status(of: ids[0])?.state == .delivered && board.pendingCount == 2)
        board.apply(.delivered(ids[1], attempts: 1), now: t0)
        board.apply(.cancelled(ids[2]), now: t0)
        #expect(board.messages.map(\.id) == [ids[2]] && board.pendingCount == 0 && board.resolvedCount == 1)
    }

    @Test func aDestinationGoesDownAndComesBack() {
        let origin = URL(string: "https://example.com:443")!
        var board = MessageBoard(keepsResolved: 2)
        board.apply(.destinationDown(origin, consecutiveFailures: 5), now: t0)
        #expect(board.destinations == [DestinationStatus(
            origin: origin, isDown: true, since: t0, consecutiveFailures: 5)])
        let later = t0.addingTimeInterval(60)
        board.apply(.destinationRecovered(origin, downFor: .seconds(60), released: 3), now: later)
        #expect(board.destinations == [DestinationStatus(
            origin: origin, isDown: false, since: later, consecutiveFailures: 0)])
    }
}

/// The model on a real courier: it lists what is pending, follows every change, and never goes
/// silently stale.
@MainActor @Suite struct CourierModelTests {
    let scratch = TemporaryDirectory()

    /// Waits (bounded, yielding) until `condition` holds; false if it never did.
    func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<5_000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }

    @Test func itFollowsMessagesSentThroughItAndStraightThroughTheCourier() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt == 1 ? .response(status: 500) : .response(status: 200) }
        let courier = try Courier(
            directory: scratch.url, configuration: testConfiguration(clock: clock, transport: transport))
        let model = CourierModel(courier: courier, keepingBodies: true)
        #expect(await eventually { model.hasLoadedForTesting })
        let viaModel = try model.send(["text": "hi"], to: inbox)
        #expect(model.status(of: viaModel)?.body == Data(#"{"text":"hi"}"#.utf8), "listed at once, with its body")
        let direct = try courier.send(["text": "there"], to: inbox)
        await courier.settle()
        let failed = await eventually {
            [viaModel, direct].allSatisfy {
                model.status(of: $0)?.state
                    == .waiting(until: wallStart.addingTimeInterval(1), after: .response(status: 500))
            }
        }
        #expect(failed, "\(model.messages)")
        #expect(model.pendingCount == 2)
        await clock.advance(by: .seconds(1))
        await courier.settle()
        #expect(await eventually { model.pendingCount == 0 }, "\(model.messages)")
        #expect(model.messages.map(\.state) == [.delivered, .delivered])
        #expect(model.messages.map(\.attempts) == [2, 2])
        #expect(model.missedEventCount == 0)
        await courier.close()
    }

    @Test func itStartsFromWhatAnEarlierRunLeftPending() async throws {
        // Each attempt fails; the next is a minute away, and the clock never moves.
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport { _ in
            .response(status: 503)
        })
        configuration.retry = RetryPolicy(initialDelay: .seconds(60), jitter: .none)
        let first = try Courier(directory: scratch.url, configuration: configuration)
        let ids = try (0..<3).map { try first.send(["n": $0], to: inbox) }
        await first.settle()
        await first.close()
        let second = try Courier(directory: scratch.url, configuration: configuration)
        let model = CourierModel(courier: second, keepingBodies: true)
        #expect(await eventually { model.messages.count == 3 }, "\(model.messages)")
        #expect(model.messages.map(\.id) == ids)
        let waiting = MessageStatus.State.waiting(until: wallStart.addingTimeInterval(60), after: nil)
        #expect(model.messages.allSatisfy { $0.state == waiting && $0.attempts == 1 }, "\(model.messages)")
        #expect(model.messages.first?.url == inbox && model.messages.first?.body == Data(#"{"n":0}"#.utf8))
        await second.close()
    }

    /// The main actor is kept busy while 40 messages are sent (each an event), so the model
    /// falls behind a buffer of 4: it reads the state again instead of going stale.
    @Test func aModelThatFellBehindReadsTheStateAgain() async throws {
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        configuration.eventBufferCapacity = 4  // the model's stream
        let courier = try Courier(directory: scratch.url, configuration: configuration)
        courier.pause()
        let model = CourierModel(keepingResolved: 100, keepingBodies: false)
        model.follow(courier)
        // Loaded: the follower subscribed (in the section that listed the pending messages).
        #expect(await eventually { model.hasLoadedForTesting && model.messages.isEmpty && model.pendingCount == 0 })
        let ids = try (0..<40).map { try courier.send(["n": $0], to: inbox) }  // no suspension: it cannot read
        #expect(await eventually { model.messages.count == 40 }, "\(model.messages.count)")
        #expect(model.messages.map(\.id) == ids)
        #expect(model.missedEventCount > 0)
        await courier.close()
    }
}

/// What a view that reads part of the model redraws for (Observation's tracking, as SwiftUI
/// uses it), and the model made before its courier.
@MainActor @Suite struct CourierModelObservationTests {
    let scratch = TemporaryDirectory()

    /// Whether reading `read` is invalidated by `change`.
    func invalidates(_ read: () -> Void, _ change: () async throws -> Void) async rethrows -> Bool {
        let fired = Locked(false)
        withObservationTracking(read) { fired.withLock { $0 = true } }
        try await change()
        return fired.withLock { $0 }
    }

    func openModel() async throws -> (CourierModel, Courier) {
        let courier = try Courier(
            directory: scratch.url,
            configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        courier.pause()
        let model = CourierModel(courier: courier)
        #expect(await eventually { model.hasLoadedForTesting })
        return (model, courier)
    }

    func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<5_000 where !condition() { try? await Task.sleep(for: .milliseconds(1)) }
        return condition()
    }

    @Test func aViewReadingOneMessageRedrawsForThatMessageOnly() async throws {
        let (model, courier) = try await openModel()
        let (a, b) = (try model.send(["n": 1], to: inbox), try model.send(["n": 2], to: inbox))
        let byAnother = await invalidates({ _ = model.status(of: a) }) {
            #expect(courier.cancel(b))
            #expect(await eventually { model.status(of: b)?.state == .cancelled })
        }
        #expect(!byAnother, "another message's change")
        let byItself = await invalidates({ _ = model.status(of: a) }) {
            #expect(courier.cancel(a))
            #expect(await eventually { model.pendingCount == 0 })
        }
        #expect(byItself)
        await courier.close()
    }

    @Test func theListOfIDsRedrawsWhenMessagesJoinOrLeaveNotWhenTheyChange() async throws {
        let (model, courier) = try await openModel()
        let a = try model.send(["n": 1], to: inbox)
        let byAChange = await invalidates({ _ = model.ids }) {
            #expect(courier.cancel(a))
            #expect(await eventually { model.status(of: a)?.state == .cancelled })
        }
        #expect(!byAChange, "a state change")
        let byASend = try await invalidates({ _ = model.ids }) { _ = try model.send(["n": 2], to: inbox) }
        #expect(byASend)
        let b = model.ids[1]
        let byACancel = await invalidates({ _ = model.messages }) {
            #expect(courier.cancel(b))
            #expect(await eventually { model.status(of: b)?.state == .cancelled })
        }
        #expect(byACancel, "the whole list changes with any message")
        await courier.close()
    }

    @Test func aModelMadeBeforeItsCourierOpensItAndKeepsWhyItCouldNot() async throws {
        let model = CourierModel()
        #expect(throws: CourierError.self) { try model.send(["n": 1], to: inbox) }
        let configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        let blocker = try Courier(directory: scratch.url, configuration: configuration)
        await model.open(directory: scratch.url, configuration: configuration)
        #expect(model.openError?.code == .directoryLocked && !model.isOpen, "\(String(describing: model.openError))")
        await blocker.close()
        await model.open(directory: scratch.url, configuration: configuration)
        #expect(model.isOpen && model.openError == nil)
        model.courier?.pause()
        let id = try model.send(["n": 1], to: inbox)
        #expect(model.status(of: id)?.state == .queued && model.status(of: id)?.body == nil, "no body unless asked")
        #expect(model.pendingCount == 1)
        await model.courier?.close()
    }

    /// A second `open` while one is under way waits for it, so a `send` after it finds the
    /// courier open; the second opener is never called.
    @Test func aSecondOpenWaitsForTheOneUnderWay() async throws {
        let courier = try Courier(
            directory: scratch.url,
            configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        courier.pause()
        let model = CourierModel()
        let first = Task { @MainActor in
            await model.open(with: {
                try? await Task.sleep(for: .milliseconds(50))
                return courier
            })
        }
        for _ in 0..<1_000 where model.opening == nil { await Task.yield() }  // the first is under way
        await model.open(with: { Issue.record("opened twice"); return courier })
        #expect(model.isOpen)
        _ = try model.send(["n": 1], to: inbox)
        await first.value
        await courier.close()
    }

    @Test func aStatusReadsAsWordsAScreenShows() {
        let t0 = Date(timeIntervalSince1970: 1_790_000_000), id = MessageID()
        let waiting = MessageStatus(
            id: id, state: .waiting(until: t0 + 4, after: .response(status: 500)), attempts: 2)
        #expect(waiting.summary(at: t0) == "attempt 2 failed (500) — next in 4.0 s")
        let delivered = MessageStatus(id: id, state: .delivered, attempts: 3, sentAt: t0, changedAt: t0 + 1.5)
        #expect("\(delivered)" == "delivered after 3 attempts (1.5 s)")
    }
}

@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import Testing

/// The app's intents and the waits, fed to the core's state as a pure function (`CoreState.handle`):
/// the records each asks for, what it answers, whom it resumes and the plan, with no courier, log,
/// lock or clock. (`CourierCore.write` appends the records, in order, in the same section.)
@Suite struct CoreIntentTests {
    /// Messages 1...n; those in `tagged` carry tag "t".
    static func core(_ n: Int, tagged: Set<Int> = []) -> CoreState {
        var projection = Projection(fifoPerDestination: false)
        for i in 1...n {
            var message = state(i)
            if tagged.contains(i) { message.tags = ["t"] }
            projection.apply(.enqueued(message), address: address(UInt64(i)))
        }
        return CoreState(projection: projection, resolved: ResolvedMemory(limit: 8))
    }

    static func handle(_ core: inout CoreState, _ input: CoreInput, at ms: UInt64? = nil) -> Effects {
        var effects = Effects()
        core.handle(input, at: ms.map(SchedulerTests.at), &effects)
        return effects
    }

    @Test func aCancelAsksForItsRecordBeforeItResolvesAndAnswersOne() {
        var core = Self.core(2)
        let effects = Self.handle(&core, .cancel(state(1).id))
        #expect(effects.appends.map(\.batch) == [[.cancelled(state(1).id)]])
        #expect(effects.appends.first?.position == 0, "a failed append is told before the cancellation")
        #expect(effects.events == [.cancelled(state(1).id)])
        #expect(effects.reply.count == 1 && effects.plan == nil)
        #expect(core.projection.slot(of: state(1).id) == nil && core.resolved[state(1).id] == .cancelled)
        let again = Self.handle(&core, .cancel(state(1).id))
        #expect(again.reply.count == 0 && again.appends.isEmpty && again.events.isEmpty)
    }

    @Test func cancellingATagAsksForOneBatchOfItsMessagesInArrivalOrder() {
        var core = Self.core(4, tagged: [1, 3, 4])
        let effects = Self.handle(&core, .cancelTagged("t"))
        let ids = [1, 3, 4].map { state($0).id }
        #expect(effects.appends.map(\.batch) == [ids.map { .cancelled($0) }])
        #expect(effects.reply.count == 3)
        #expect(core.projection.count == 1)
        #expect(Self.handle(&core, .cancelTagged("t")).appends.isEmpty, "nothing left to cancel: no record")
    }

    @Test func cancellingAllAsksForOneBatchOfEveryPendingMessageInArrivalOrder() {
        var core = Self.core(3, tagged: [2])
        let effects = Self.handle(&core, .cancelAll)
        #expect(effects.appends.map(\.batch) == [(1...3).map { .cancelled(state($0).id) }])
        #expect(effects.events == (1...3).map { .cancelled(state($0).id) })
        #expect(effects.reply.count == 3 && core.projection.isEmpty)
        #expect(Self.handle(&core, .cancelAll).appends.isEmpty, "nothing left to cancel: no record")
    }

    @Test func aHoldIsLoggedOnceAndAReleaseOfATagNotHeldLogsAndPlansNothing() {
        var core = Self.core(3, tagged: [2, 3])
        let notHeld = Self.handle(&core, .release(tag: "t"), at: 1000)
        #expect(notHeld.appends.isEmpty && notHeld.plan == nil && notHeld.reply.count == 2)
        let held = Self.handle(&core, .hold(tag: "t"))
        #expect(held.appends.map(\.batch) == [[.held(tag: "t")]] && held.reply.count == 2)
        let again = Self.handle(&core, .hold(tag: "t"))
        #expect(again.appends.isEmpty && again.reply.count == 2, "holding a held tag logs nothing")
        let released = Self.handle(&core, .release(tag: "t"), at: 2000)
        #expect(released.appends.map(\.batch) == [[.released(tag: "t")]] && released.reply.count == 2)
        #expect(released.plan?.instant.wallMilliseconds == 2000)
    }

    @Test func aClosedCoreChangesNothingTheAppAsksAndAnswersZero() {
        var core = Self.core(2, tagged: [1])
        let closing = Self.handle(&core, .close)
        #expect(closing.reply.attempts.isEmpty && closing.reply.timer == nil)
        let inputs: [CoreInput] = [
            .cancel(state(1).id), .cancelTagged("t"), .cancelAll, .hold(tag: "t"), .release(tag: "t"),
        ]
        for input in inputs {
            let effects = Self.handle(&core, input, at: 1000)
            #expect(effects.appends.isEmpty && effects.reply.count == 0 && effects.plan == nil)
        }
        #expect(core.projection.count == 2)
    }

    @Test func aForcedRunCountsDeliveriesStopsAttemptsAndPlansWhenItEnds() {
        var core = Self.core(2)
        #expect(Self.handle(&core, .forcedRun(.begin)).reply.count == 0)
        core.scheduler.attempts[1] = Task {}
        let stop = Self.handle(&core, .forcedRun(.stop))
        #expect(stop.reply.attempts.count == 1 && !core.scheduler.mode.mayStartAttempts && stop.plan == nil)
        let end = Self.handle(&core, .forcedRun(.end), at: 3000)
        #expect(end.reply.pending == 2 && end.reply.handedOff == 0 && end.plan?.instant.wallMilliseconds == 3000)
        #expect(core.scheduler.mode.forcedRuns == 0 && core.scheduler.mode.stopping == 0)
    }

    @Test func aWaitForAResolvedMessageIsAnsweredAtOnceAndOneForAPendingMessageWaits() async {
        var core = Self.core(2)
        _ = Self.handle(&core, .cancel(state(1).id))
        let key = WaitKey()
        let cancelled: Result<UInt16, any Error> = await withCheckedContinuation { waiter in
            let effects = Self.handle(&core, .waitForDelivery(state(1).id, key: key.id, waiter, cancelled: { false }))
            #expect(effects.answered.filter { (try? $0.1.get()) == nil }.count == 1 && core.waiters.isEmpty)
            effects.run()
        }
        #expect((try? cancelled.get()) == nil)
        let stopped: Result<UInt16, any Error> = await withCheckedContinuation { waiter in
            let effects = Self.handle(&core, .waitForDelivery(state(2).id, key: key.id, waiter, cancelled: { false }))
            #expect(effects.answered.isEmpty && core.waiters[state(2).id]?.count == 1)
            let stop = Self.handle(&core, .stopWaiting(key: key.id, for: state(2).id))
            #expect(core.waiters.isEmpty)
            stop.run()
        }
        #expect(throws: CancellationError.self) { try stopped.get() }
    }

    @Test func anIdleWaiterWaitsForTheLastMessageAndHeldMessagesDoNotCount() async {
        var core = Self.core(2, tagged: [2])
        let key = WaitKey()
        await withCheckedContinuation { continuation in
            let waiter = IdleWaiter(continuation: continuation, exceptHandedOff: false)
            #expect(Self.handle(&core, .waitUntilIdle(key: key.id, waiter, cancelled: { false })).idle.isEmpty)
            #expect(Self.handle(&core, .hold(tag: "t")).idle.isEmpty, "message 1 is still pending")
            let last = Self.handle(&core, .cancel(state(1).id))
            #expect(last.idle.count == 1 && core.idleWaiters.isEmpty)
            last.run()
        }
    }

    /// Message 1's first attempt, in slot 5, ended with `status` at wall time 2000.
    static func ended(_ status: Int) -> CoreInput {
        let attempt = Attempt(id: state(1).id, number: 1, startedMilliseconds: 1000)
        let outcome = DeliveryOutcome.response(status: status)
        let ending = Ending(
            attempt: attempt, outcome: outcome, createdMilliseconds: 500, runner: .engine(token: 5), url: nil,
            continuing: true)
        return .ended(ending)
    }

    @Test func aFailedAttemptAsksForItsRecordWithTheNextDueTimeAndFreesItsSlot() {
        var core = Self.core(1)
        _ = Scheduler.plan(&core, at: SchedulerTests.at(1000), limits: SchedulerTests.limits(), handOffAsked: false)
        let effects = Self.handle(&core, Self.ended(500), at: 2000)
        guard case .retry(let due, _, _) = effects.reply.verdict else {
            Issue.record("a 500 is retried, not \(String(describing: effects.reply.verdict))")
            return
        }
        #expect(due > 2000 && core.projection.slot(of: state(1).id)?.dueMilliseconds == due)
        let record = Event.attempted(state(1).id, attempt: 1, outcome: .response(status: 500), nextDueMilliseconds: due)
        #expect(effects.appends.map(\.batch) == [[record]])
        #expect(effects.plan?.freeing == 5 && effects.plan?.continuing == true && effects.plan?.handOffAsked == false)
        #expect(!effects.reply.endedHandOff)
    }

    @Test func aDeliveryAsksForItsRecordAndResolvesTheMessage() {
        var core = Self.core(1)
        _ = Scheduler.plan(&core, at: SchedulerTests.at(1000), limits: SchedulerTests.limits(), handOffAsked: false)
        let effects = Self.handle(&core, Self.ended(200), at: 2000)
        #expect(effects.appends.map(\.batch) == [[.delivered(state(1).id, attempt: 1, status: 200)]])
        #expect(effects.events == [.delivered(state(1).id, attempts: 1)])
        #expect(core.projection.isEmpty && core.deliveredCount == 1)
        #expect(core.resolved[state(1).id] == .delivered(status: 200))
    }
}

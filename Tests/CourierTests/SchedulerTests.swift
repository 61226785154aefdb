@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import Testing

/// The scheduler decides from the core's state and the time alone: these build states by hand
/// and read the plan, with no courier, clock or task.
@Suite struct SchedulerTests {
    /// Messages 1...n to one destination, due at `due` (wall ms).
    static func core(
        _ n: Int, due: UInt64 = 1000,
        url: (Int) -> String = { _ in "https://example.com/a" }
    ) -> CoreState {
        var projection = Projection(fifoPerDestination: false)
        for i in 1...n { projection.apply(.enqueued(state(i, url: url(i), due: due)), address: address(UInt64(i))) }
        return CoreState(projection: projection, resolved: ResolvedMemory(limit: 8))
    }

    static func limits(
        slots: Int = 4, handOffs: Int = 0,
        excluded: @escaping @Sendable (String) -> Bool = { _ in false }
    ) -> Scheduler.Limits {
        Scheduler.Limits(maximumConcurrentDeliveries: slots, maximumHandOffs: handOffs, isExcludedFromHandOff: excluded)
    }

    /// Wall time 1000 ms is 10 s on the injected clock.
    static func at(_ wallMilliseconds: UInt64) -> EngineInstant {
        EngineInstant(
            elapsed: .seconds(10) + .milliseconds(Int64(wallMilliseconds) - 1000),
            wallMilliseconds: wallMilliseconds)
    }

    @Test func dueMessagesStartUpToTheFreeSlotsAndNoTimerIsArmedWithoutOne() {
        var core = Self.core(3)
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(slots: 2), handOffAsked: false)
        #expect(plan.attempts.map(\.id) == [state(1).id, state(2).id])
        #expect(plan.attempts.allSatisfy { $0.number == 1 && $0.startedMilliseconds == 1000 })
        #expect(plan.uploads.isEmpty)
        #expect(plan.timerDeadline == nil, "no slot is free: the end of an attempt pumps")
        #expect(core.projection.slot(of: state(1).id)?.flags.contains(.inFlight) == true)
        #expect(core.projection.slot(of: state(3).id)?.flags.contains(.inFlight) == false)
    }

    @Test func theTimerIsArmedForTheEarliestMessageNotYetDue() {
        var core = Self.core(1, due: 1500)
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(), handOffAsked: false)
        #expect(plan.attempts.isEmpty)
        #expect(plan.timerDeadline == .milliseconds(10_500))
    }

    @Test func aTimerAlreadyArmedSoonEnoughIsKept() {
        var core = Self.core(1, due: 1500)
        core.scheduler.timer = (Task {}, .milliseconds(10_200))
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(), handOffAsked: false)
        #expect(plan.timerDeadline == nil)
        core.scheduler.timer = (Task {}, .milliseconds(10_900))
        #expect(
            Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(), handOffAsked: false).timerDeadline
                == .milliseconds(10_500))
    }

    @Test(arguments: [DeliveryMode.Phase.reconciling, .closed])
    func nothingStartsOutsideTheRunningPhase(phase: DeliveryMode.Phase) {
        var core = Self.core(2)
        core.scheduler.mode.phase = phase
        core.scheduler.mode.place = .background
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(handOffs: 10), handOffAsked: true)
        #expect(plan.attempts.isEmpty && plan.uploads.isEmpty && plan.timerDeadline == nil)
        #expect(core.projection.earliestDue == 1000, "nothing was taken")
    }

    @Test func aPausedEngineStartsNothingUntilADeliverPendingRun() {
        var core = Self.core(1)
        core.scheduler.mode.paused = true
        #expect(Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(), handOffAsked: false).attempts.isEmpty)
        core.scheduler.mode.forcedRuns = 1
        let forced = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(), handOffAsked: false)
        #expect(forced.attempts.count == 1)
    }

    @Test func inTheBackgroundTheSessionTakesMessagesWhateverTheirDueTimeUpToItsBound() {
        var core = Self.core(3, due: 90_000)
        core.scheduler.mode.place = .background
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(handOffs: 2), handOffAsked: false)
        #expect(plan.uploads.map(\.slot.id) == [state(1).id, state(2).id])
        #expect(plan.uploads.allSatisfy { $0.beginMilliseconds == 90_000 }, "the session waits for the due time")
        #expect(core.handOffsStarting == 2)
        #expect(plan.attempts.isEmpty)
        #expect(plan.timerDeadline != nil, "the third is the engine's when due")
    }

    @Test func aCompletionHandsOffUnlessTheAppIsKnownToBeInTheForeground() {
        for (place, handsOff) in [(DeliveryMode.Place.unknown, true), (.background, true), (.foreground, false)] {
            var core = Self.core(1)
            core.scheduler.mode.place = place
            let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(handOffs: 5), handOffAsked: true)
            #expect(plan.uploads.count == (handsOff ? 1 : 0), "\(place)")
            #expect(plan.attempts.count == (handsOff ? 0 : 1), "\(place)")
        }
    }

    @Test func withThePlaceUnknownOnlyACompletionHandsOff() {
        var core = Self.core(1)
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(handOffs: 5), handOffAsked: false)
        #expect(plan.uploads.isEmpty)
        #expect(plan.attempts.count == 1)
    }

    @Test func excludedDestinationsAndForegroundOnlyMessagesStayWithTheEngine() {
        var core = Self.core(3) { $0 == 2 ? "https://excluded.example/a" : "https://example.com/\($0)" }
        core.scheduler.mode.place = .background
        core.foregroundOnly.insert(state(3).id)
        let limits = Self.limits(handOffs: 5) { $0.contains("excluded") }
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: limits, handOffAsked: false)
        #expect(plan.uploads.map(\.slot.id) == [state(1).id])
        #expect(Set(plan.attempts.map(\.id)) == [state(2).id, state(3).id])
    }

    @Test func handOffsUnderWayAndStartingCountAgainstTheBound() {
        var core = Self.core(3, due: 90_000)
        core.scheduler.mode.place = .background
        core.handOffsStarting = 1
        core.projection.withhold(state(3).id)
        core.handOffs[state(3).id] = HandOff(attempt: 1, ticket: 1, taskIdentifier: 1, earliestBeginMilliseconds: 0)
        let plan = Scheduler.plan(&core, at: Self.at(1000), limits: Self.limits(handOffs: 3), handOffAsked: false)
        #expect(plan.uploads.count == 1)
    }

    @Test func settledMeansNothingUnderWayAndNothingDueWithoutATimer() {
        var core = Self.core(1)
        #expect(!Scheduler.isSettled(core, at: Self.at(1000)), "due, and no timer: a pump is coming")
        #expect(Scheduler.isSettled(core, at: Self.at(999)))
        core.scheduler.mode.paused = true
        #expect(Scheduler.isSettled(core, at: Self.at(1000)), "paused: nothing more will start")
        core.scheduler.mode.paused = false
        core.scheduler.timer = (Task {}, .seconds(10))
        #expect(!Scheduler.isSettled(core, at: Self.at(1000)), "the timer is past its deadline")
        #expect(Scheduler.isSettled(core, at: Self.at(999)))
        core.scheduler.passes[0] = Task { 0 }
        #expect(!Scheduler.isSettled(core, at: Self.at(999)), "a hand-off pass is under way")
        core.scheduler.passes.removeAll()
        core.compaction.compacting = true
        #expect(!Scheduler.isSettled(core, at: Self.at(999)), "a compaction is under way")
        core.scheduler.mode.phase = .closed
        #expect(Scheduler.isSettled(core, at: Self.at(999)))
    }

    /// A hand-off pass parks a message not yet due when its destination is at its limit; back in
    /// the foreground the engine takes it as soon as the limit allows, whatever its due time
    /// (no timer is armed for a parked message's due time: waiting for it stalled delivery).
    @Test func aMessageAHandOffParkedBeforeItWasDueGoesAsSoonAsTheLimitAllows() {
        var p = Projection(fifoPerDestination: false)
        p.origins.rules = Governor.Rules(concurrency: ConcurrencyLimit(initialLimit: 1), maximumConcurrency: 1)
        p.apply(.enqueued(state(1, due: 1000)), address: address(1))
        p.apply(.enqueued(state(2, due: 5000)), address: address(2))
        #expect(p.takeNext(.whenAllowed, nowMilliseconds: 1000)?.slot.id == state(1).id)
        #expect(p.takeNext(.whenAllowed, nowMilliseconds: 1000) == nil, "at its limit: the next is parked")
        #expect(p.slot(of: state(2).id)?.flags.contains(.parked) == true)
        p.remove(state(1).id)  // its upload delivered it
        let taken = p.takeNext(.now, nowMilliseconds: 1000)
        #expect(taken?.slot.id == state(2).id && taken?.beginMilliseconds == 1000)
    }

    /// Once its destination has answered, a hand-off is bounded by the session, not by the
    /// destination's concurrency limit (learned from answers a suspended app hears only at its
    /// wakes), and still keeps to its pace; the engine keeps to both.
    @Test func aHandOffToADestinationThatAnsweredKeepsToItsPaceNotItsLimit() {
        var p = Projection(fifoPerDestination: false)
        p.origins.rules = Governor.Rules(concurrency: ConcurrencyLimit(initialLimit: 1), maximumConcurrency: 1)
        for n in 1...3 { p.apply(.enqueued(state(n, due: 1000)), address: address(UInt64(n))) }
        p.origins[0].governor.lastHealthyMilliseconds = 900
        p.origins[0].governor.flow.ratePerSecond = 2  // paced by a 429 earlier: a start every 500 ms
        let taken = p.take(.whenAllowed, limit: 10, nowMilliseconds: 1000)
        #expect(taken.map(\.slot.id) == [1, 2, 3].map { state($0).id }, "past the limit of 1")
        #expect(taken.map(\.beginMilliseconds) == [1000, 1500, 2000], "at the destination's pace")
        p.apply(.enqueued(state(4, due: 1000)), address: address(4))
        #expect(p.takeNext(.now, nowMilliseconds: 5000) == nil, "the engine keeps to the limit")
    }
}

/// The inputs that append nothing, fed to the core's state as a pure function: what each one
/// changes, and the plan it asks for (`CoreState.handle`), with no courier, lock or clock.
@Suite struct CoreInputTests {
    /// `input` applied to `core` at wall time `ms`: the plan it asks for.
    static func plan(_ core: inout CoreState, _ input: CoreInput, at ms: UInt64) -> PlanRequest? {
        effects(&core, input, at: ms).plan
    }

    static func effects(_ core: inout CoreState, _ input: CoreInput, at ms: UInt64) -> Effects {
        var effects = Effects()
        core.handle(input, at: SchedulerTests.at(ms), &effects)
        return effects
    }

    @Test func pauseAndPlaceAskForNoPlanAndResumeAsksForOne() {
        var core = SchedulerTests.core(1)
        #expect(Self.plan(&core, .pause, at: 1000) == nil)
        #expect(core.scheduler.mode.paused)
        #expect(Self.plan(&core, .place(.background), at: 1000) == nil)
        #expect(core.scheduler.mode.place == .background)
        let plan = Self.plan(&core, .resume, at: 2000)
        #expect(!core.scheduler.mode.paused)
        #expect(plan?.instant.wallMilliseconds == 2000 && plan?.freeing == nil && plan?.handOffAsked == false)
    }

    @Test func retryNowMakesEveryWaitingMessageDueNow() {
        var core = SchedulerTests.core(2, due: 90_000)
        #expect(Self.plan(&core, .retryNow, at: 1000) != nil)
        #expect(core.projection.slot(of: state(2).id)?.dueMilliseconds == 1000)
    }

    @Test func aRunnerThatEndedFreesItsSlotInThePlanAndAWakeAsksForAPlan() {
        var core = SchedulerTests.core(1)
        let freed = Self.plan(&core, .runnerFree(token: 7, continuing: false), at: 1000)
        #expect(freed?.freeing == 7 && freed?.continuing == false)
        let woken = Self.plan(&core, .wake, at: 2000)
        #expect(woken?.instant.wallMilliseconds == 2000 && woken?.freeing == nil && woken?.handOffAsked == false)
    }

    @Test func onlyTheArmedTimerIsForgottenAndOnlyAReconcilingPhaseStartsRunning() {
        var core = SchedulerTests.core(1)
        let timer = Task<Void, Never> {}
        core.scheduler.timer = (timer, .seconds(30))
        _ = Self.plan(&core, .timerFired(deadline: .seconds(20)), at: 1000)
        #expect(core.scheduler.timer?.deadline == .seconds(30), "a replaced timer's firing changes nothing")
        _ = Self.plan(&core, .timerFired(deadline: .seconds(30)), at: 1000)
        #expect(core.scheduler.timer == nil)
        core.scheduler.mode.phase = .closed
        _ = Self.plan(&core, .reconciliationEnded, at: 1000)
        #expect(core.scheduler.mode.phase == .closed)
        core.scheduler.mode.phase = .reconciling
        _ = Self.plan(&core, .reconciliationEnded, at: 1000)
        #expect(core.scheduler.mode.phase == .running)
        core.scheduler.passes[3] = Task { 0 }
        #expect(Self.plan(&core, .passEnded(token: 3), at: 1000) != nil)
        #expect(core.scheduler.passes.isEmpty)
    }

    @Test func aCancelledAttemptIsNoAttemptAndItsRunnerEnds() {
        var core = SchedulerTests.core(1)
        let limits = SchedulerTests.limits()
        let plan = Scheduler.plan(&core, at: SchedulerTests.at(1000), limits: limits, handOffAsked: false)
        #expect(plan.attempts.map(\.id) == [state(1).id])
        let freed = Self.plan(&core, .attemptCancelled(state(1).id, token: 4), at: 1000)
        #expect(freed?.freeing == 4 && freed?.continuing == false)
        #expect(core.projection.slot(of: state(1).id)?.flags.contains(.inFlight) == false)
        #expect(core.projection.slot(of: state(1).id)?.attempts == 0, "as on disk")
    }

    @Test func anUnreadableMessageIsSaidAndDueAgainLater() {
        var core = SchedulerTests.core(1)
        _ = Scheduler.plan(&core, at: SchedulerTests.at(1000), limits: SchedulerTests.limits(), handOffAsked: false)
        let input = CoreInput.unreadable(
            state(1).id, LogError(.io, "disk"), dueMilliseconds: 301_000, token: 2, continuing: true)
        let effects = Self.effects(&core, input, at: 1000)
        #expect(effects.plan?.freeing == 2 && effects.plan?.continuing == true)
        #expect(effects.events.contains { if case .storageFailed = $0 { true } else { false } })
        #expect(core.projection.slot(of: state(1).id)?.dueMilliseconds == 301_000)
    }

    @Test func anEndedCompactionCountsOnlyIfItSucceededAndAFailedOneIsSaid() {
        var core = SchedulerTests.core(1)
        core.compaction.compacting = true
        let failed = Self.effects(&core, .compactionEnded(error: CourierError(.storageFailed, "full")), at: 1000)
        #expect(!core.compaction.compacting && core.compaction.compactions == 0)
        #expect(failed.events.count == 1 && failed.plan != nil)
        core.compaction.compacting = true
        #expect(Self.effects(&core, .compactionEnded(error: nil), at: 1000).events.isEmpty)
        #expect(!core.compaction.compacting && core.compaction.compactions == 1)
    }

    @Test func theEndOfCloseFinishesEveryStreamAndPlansNothing() {
        var core = SchedulerTests.core(1)
        let buffer = EventBuffer()
        core.subscribers[ObjectIdentifier(buffer)] = buffer
        let effects = Self.effects(&core, .closeEnded, at: 1000)
        #expect(effects.finishStreams.count == 1 && core.subscribers.isEmpty)
        #expect(effects.plan == nil)
    }
}

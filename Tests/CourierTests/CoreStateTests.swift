@testable @_spi(CourierTesting) import CourierKit
import Testing

/// The core's own invariants, around the projection's: what debug builds assert after writes.
@Suite struct CoreStateTests {
    static func pendingState() -> CoreState {
        var projection = Projection(fifoPerDestination: false)
        projection.apply(.enqueued(state(1)), address: address(1))
        return CoreState(projection: projection, resolved: ResolvedMemory(limit: 8))
    }

    static let handOff = HandOff(attempt: 1, ticket: 7, taskIdentifier: 3, earliestBeginMilliseconds: 0)

    @Test func aHandOffOfAMessageInFlightHoldsTheInvariants() {
        var core = Self.pendingState()
        core.projection.withhold(state(1).id)
        core.handOffs[state(1).id] = Self.handOff
        #expect(core.brokenInvariant() == nil)
    }

    @Test func aHandOffOfAMessageTheEngineCouldTakeIsBroken() {
        var core = Self.pendingState()
        core.handOffs[state(1).id] = Self.handOff
        #expect(core.brokenInvariant()?.contains("not in flight") == true)
    }

    @Test func aHandOffOfNoPendingMessageIsBroken() {
        var core = Self.pendingState()
        core.handOffs[state(2).id] = Self.handOff
        #expect(core.brokenInvariant()?.contains("names no pending message") == true)
    }

    @Test func countsBelowZeroAreBroken() {
        var core = Self.pendingState()
        core.handOffsStarting = -1
        #expect(core.brokenInvariant() != nil)
        core.handOffsStarting = 0
        core.scheduler.mode.stopping = -1
        #expect(core.brokenInvariant() != nil)
    }

    @Test func handOffsStartingWithNoPassUnderWayAreBroken() {
        var core = Self.pendingState()
        core.handOffsStarting = 1
        #expect(core.brokenInvariant()?.contains("no pass under way") == true)
        core.scheduler.passes[0] = Task { 0 }
        #expect(core.brokenInvariant() == nil)
    }
}

@testable import Courier
import CourierTesting
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The platform-neutral halves of the Apple integration, tested here so the Apple-only files
/// stay thin (issue 8).
@Suite struct PlatformSupportTests {
    @Test func theNetworkPolicyIsMappedOntoTheSessionConfiguration() {
        var c = Courier.Configuration()
        #expect(URLSessionTransport.sessionConfiguration(for: c).allowsCellularAccess)
        c.allowsCellularAccess = false
        c.allowsExpensiveNetworkAccess = false
        c.allowsConstrainedNetworkAccess = false
        let session = URLSessionTransport.sessionConfiguration(for: c)
        #expect(!session.allowsCellularAccess)
        #if canImport(Darwin)
        #expect(!session.allowsExpensiveNetworkAccess && !session.allowsConstrainedNetworkAccess)
        #endif
    }

    @Test func aBackgroundRunThatDeliversEverythingSucceedsAndAsksForNoOther() async throws {
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        courier.pause()
        try courier.send(["n": 1], to: inbox)
        let outcome = await courier.runBackgroundDelivery(within: Courier.backgroundBudget)
        #expect(outcome.success && !outcome.reschedule)
        await courier.close()
    }

    @Test func aBackgroundRunCutShortAsksForAnother() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: testConfiguration(clock: clock, transport: transport))
        try courier.send(["n": 1], to: inbox)
        let run = Task { await courier.runBackgroundDelivery(within: Courier.backgroundBudget) }
        await transport.waitForRequests(1)
        run.cancel()  // iOS expired the task
        let outcome = await run.value
        #expect(!outcome.success && outcome.reschedule)
        await courier.close()
    }

    @Test func closeStopsThePlatformIntegration() async throws {
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        let integration = FakeIntegration()
        courier.lifecycle.value = integration
        await courier.close()
        #expect(await integration.stopped)
        #expect(courier.lifecycle.value == nil)
    }
}

@MainActor
final class FakeIntegration: PlatformIntegration {
    var stopped = false
    func stop() { stopped = true }
}

@Suite struct OnceFlagTests {
    @Test func onlyTheFirstClaimWinsAcrossThreads() async {
        let flag = OnceFlag()
        let wins = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<50 { group.addTask { flag.claim() } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(wins == 1)
    }
}

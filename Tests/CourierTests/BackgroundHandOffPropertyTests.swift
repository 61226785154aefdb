@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// Kills at random points of hand-off, completion and relaunch, force-quits, and returns to
/// the foreground, against a server that fails half the time: every acknowledged message is
/// delivered in the end, and no message is ever in flight twice.
@Suite(.timeLimit(.minutes(2))) struct BackgroundHandOffPropertyTests {
    /// What the server saw: which messages it answered 2xx.
    final class FlakyServer: @unchecked Sendable {
        let lock = NSLock()
        var accepted = Set<MessageID>()
        let random: SeededRandomSource
        init(seed: UInt64) { random = SeededRandomSource(seed: seed) }
        lazy var transport = ScriptedTransport { [unowned self] request in
            lock.lock(); defer { lock.unlock() }
            guard random.next() % 2 == 0 else { return .response(status: 500) }
            accepted.insert(request.messageID)
            return .response(status: 200)
        }
        var acceptedIDs: Set<MessageID> { lock.withLock { accepted } }
    }

    @Test(arguments: 0..<200)
    func randomKillsLoseNothingAndNothingIsInFlightTwice(seed: UInt64) async throws {
        let server = FlakyServer(seed: seed &* 7919 &+ 1)
        let steps = SeededRandomSource(seed: seed)
        func roll(_ n: UInt64) -> Int { Int(steps.next() % n) }
        var configuration = BackgroundHandOffTests.configuration(bound: 1 + roll(6))
        // The default limit: at most its limit per destination in flight, engine and uploads.
        configuration.concurrencyLimit = roll(2) == 0 ? .adaptive : ConcurrencyLimit(initialLimit: 1 + roll(3))
        configuration.random = SeededRandomSource(seed: seed).next
        let app = SimulatedApp(server: server.transport, configuration: configuration)
        await app.system.launch()
        var acknowledged: [MessageID] = []
        /// The launch (open count) whose disk failed, if any: that process cannot read its
        /// messages back, so it ends before the last phase (as an app whose disk fails would).
        var diskFailedInProcess: Int?
        // A bounded random walk through the app's life.
        for _ in 0..<30 {
            switch roll(10) {
            case 0, 1, 2:
                // Messages sent just before the app leaves the screen, so some are pending then.
                if roll(2) == 0 { app.courier?.pause() }
                for i in 0..<(1 + roll(6)) {
                    if let id = app.send("m\(i)", to: roll(3) == 0 ? URL(string: "https://other.example/in")! : inbox) {
                        acknowledged.append(id)
                    }
                }
                if roll(3) != 0 { await app.enterBackground() }
            case 3: await app.enterForeground()
            case 4, 5, 6: await app.system.advance(by: .seconds(Int64(1 + roll(90))))
            case 7: app.system.kill(afterInteractions: 1 + roll(8))
            case 8:
                switch roll(4) {
                case 0: app.system.forceQuit()
                // The disk fails from a random write on, for the rest of this process (its
                // records are lost while it goes on running): only the next launch repairs it.
                case 1:
                    app.fileSystem.stopAfter(operations: roll(12))
                    diskFailedInProcess = app.openCount
                default: app.system.kill()
                }
            default: if app.system.appState == .notRunning { await app.system.launch(inBackground: roll(2) == 0) }
            }
            if let courier = app.courier, app.system.appState != .notRunning { await courier.settle() }
        }
        // The user comes back, and the app runs until everything is delivered.
        app.system.kill(afterInteractions: Int.max)  // disarm a pending kill (it never comes)
        if diskFailedInProcess == app.openCount, app.system.appState != .notRunning { app.system.kill() }
        if app.system.appState == .notRunning { await app.system.launch() } else { await app.enterForeground() }
        // Until the server has every message and the courier knows it (a 2xx whose completion
        // died with the app is sent again: the duplicate the Idempotency-Key covers).
        for _ in 0..<400
        where !Set(acknowledged).isSubset(of: server.acceptedIDs) || (app.courier?.pendingCount ?? 1) > 0 {
            await app.system.advance(by: .seconds(30))
            await app.courier?.settle()
        }
        let lost = Set(acknowledged).subtracting(server.acceptedIDs)
        #expect(lost.isEmpty,
                "seed \(seed): \(lost.count) of \(acknowledged.count) acknowledged messages never delivered")
        #expect(app.system.statistics.inFlightTwice == 0, "seed \(seed)")
        #expect(app.system.statistics.missingBodies == 0, "seed \(seed)")
        await app.courier?.settle()
        #expect(app.courier?.pendingCount == 0, "seed \(seed)")
    }
}

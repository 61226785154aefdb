@testable @_spi(CourierTesting) import CourierKit
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// The engine and a disk that fails reads under a destination that is down.
@Suite(.timeLimit(.minutes(1))) struct UnreadableProbeTests {
    let directory = URL(fileURLWithPath: "/c")

    /// A down destination's probe whose message cannot be read back waits for the next probe
    /// time like any probe; it is not taken again at once, forever (a spin found by the
    /// background hand-off property test).
    @Test func anUnreadableProbeWaitsLikeAnyOther() async throws {
        let fs = SimulatedFileSystem()
        let clock = ManualClock()
        var config = testConfiguration(clock: clock, transport: ScriptedTransport { _ in .response(status: 503) })
        config.fileSystem = fs
        config.destinationBackoff = DestinationBackoff(failuresBeforeDown: 1)
        config.retry = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(60), jitter: .none)
        do {  // two messages on disk, none in the fresh process's memory
            var first = config
            first.transport = ScriptedTransport()
            let courier = try Courier(directory: directory, configuration: first)
            courier.pause()
            _ = try courier.send(["n": 1], to: inbox)
            _ = try courier.send(["n": 2], to: inbox)
            await courier.close()
        }
        let courier = try Courier(directory: directory, configuration: config)
        await courier.settle()  // the first attempt fails: the destination is down, the other message parked
        fs.stopAfter(operations: 0)  // from now on, nothing reads back
        let before = fs.count(of: .read)
        await clock.advance(by: .seconds(2))  // the probe's time
        // Settles at once when right; when wrong it never would (the engine spins on the
        // cooperative pool), so a watchdog on a Dispatch thread pauses the engine after 10 s of
        // wall time, which lets it settle and the count below fail. A passing run never waits.
        let watchdog = DispatchWorkItem { courier.pause() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 10, execute: watchdog)
        await courier.settle()
        watchdog.cancel()
        #expect(fs.count(of: .read) - before <= 4,
                "the unreadable probe was retried \(fs.count(of: .read) - before) times")
        fs.clearFaults()
        fs.stopAfter(operations: nil)
        await courier.close()
    }
}

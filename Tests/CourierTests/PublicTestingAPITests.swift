@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// What an app's own tests can do with the public API alone: no `@testable import` here.
@Suite struct PublicTestingAPITests {
    @Test func anAppDrivesRetriesWithAManualClockAndSettle() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("app-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt < 3 ? .response(status: 500) : .response(status: 200) }
        var config = Courier.Configuration()
        config.clock = clock
        config.transport = transport
        config.retry = RetryPolicy(initialDelay: .seconds(10), jitter: .none)
        config.allowsPurgeableDirectory = true  // a test's scratch folder, in tmp
        let courier = try await Courier.open(directory: dir, configuration: config)
        let id = try courier.send(["hello": "world"], to: URL(string: "https://example.com/inbox")!)
        await courier.settle()
        #expect(transport.requests.count == 1)
        await clock.advance(by: .seconds(10))
        await courier.settle()
        #expect(transport.requests.count == 2)
        await clock.advance(by: .seconds(20))
        try await courier.delivered(id)
        #expect(transport.requests.map(\.attempt) == [1, 2, 3])
        #expect(courier.compactionCount == 0)
        await courier.close()
    }

    @Test func openingOffTheCallersThreadThrowsWhatInitThrows() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("app-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        let first = try await Courier.open(directory: dir, configuration: config)
        await #expect { try await Courier.open(directory: dir, configuration: config) }
            throws: { ($0 as? CourierError)?.code == .directoryLocked }
        await first.close()
    }

    /// A courier with its own (default) transport, dropped without `close()`, and one whose
    /// init failed: neither leaks nor traps (AsyncHTTPClient traps on an unshut client).
    @Test func aCourierDroppedWithoutCloseReleasesItsOwnTransport() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("app-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var scratch = Courier.Configuration()
        scratch.allowsPurgeableDirectory = true
        do {
            let dropped = try Courier(directory: dir, configuration: scratch)
            _ = dropped.pendingCount
        }
        // A dropped courier lets the directory go when its last reference does: after the work
        // it queued at open (a compaction check on its I/O queue) has run, which under load is
        // a moment after the drop. Bounded: 1,000 tries 10 ms apart.
        var reopened: Courier?
        for _ in 0..<1_000 {
            do throws(CourierError) {
                reopened = try Courier(directory: dir, configuration: scratch)
                break
            } catch {
                guard error.code == .directoryLocked else { throw error }
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let again = try #require(reopened, "the dropped courier never let the directory go")
        #expect { try Courier(directory: dir, configuration: scratch) } throws: {
            ($0 as? CourierError)?.code == .directoryLocked
        }
        await again.close()
    }
}

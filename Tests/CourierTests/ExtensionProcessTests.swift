@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import FlakyServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The built `courier-outbox` binary, next to the test bundle.
func courierOutboxBinary() -> String {
    courierLoadBinary().replacingOccurrences(of: "/courier-load", with: "/courier-outbox")
}

/// Extensions and the app as real processes (`courier-outbox`), SIGKILLed at random moments
/// and restarted: writers send through `ExtensionOutbox` while an app collects and delivers to
/// a loopback server that fails 30% of requests.
@Suite struct ExtensionProcessTests {
    /// Starts `courier-outbox` with `arguments`, its output on a pipe.
    func start(_ arguments: [String]) throws -> (Process, Pipe) {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: courierOutboxBinary())
        child.arguments = arguments
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        return (child, pipe)
    }

    @Test(.timeLimit(.minutes(3)))
    func killedWritersAndAKilledAppLoseNothingAcknowledgedAndCollectNothingTwice() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: courierOutboxBinary()), "build first: make test")
        let server = try await FlakyServer(behavior: .init(failureRate: 0.3, seed: 31))
        let url = await server.url
        let scratch = TemporaryDirectory()
        let outbox = scratch.url.appendingPathComponent("group/outbox").path
        let appDirectory = scratch.url.appendingPathComponent("app").path
        var rng = SeededRandom(seed: 0x0B0C_0037)
        var acknowledged: [MessageID] = []
        var app = try start(["app", appDirectory, outbox])
        // Rounds: three writers at once, each killed after a random number of acknowledged
        // sends; the app killed and restarted every other round. Bounded: 6 rounds.
        for round in 0..<6 {
            let writers = try (0..<3).map { w in
                try start(["write", outbox, url.absoluteString, "400", "r\(round)w\(w)", "300"])
            }
            for (child, pipe) in writers {
                let killAfter = Int.random(in: 5...60, using: &rng)
                acknowledged += await acknowledgements(from: pipe, atLeast: killAfter)
                await killAndWait(child)
            }
            if round % 2 == 1 {
                await killAndWait(app.0)
                app = try start(["app", appDirectory, outbox])
            }
        }
        await killAndWait(app.0)
        // The last app runs in this process until every acknowledged message was delivered.
        var configuration = Courier.Configuration()
        configuration.allowsPurgeableDirectory = true
        configuration.extensionOutboxDirectory = URL(fileURLWithPath: outbox)
        configuration.retry = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(50))
        let courier = try Courier(directory: URL(fileURLWithPath: appDirectory), configuration: configuration)
        await courier.collectExtensionMessages()
        await courier.waitUntilIdle()
        await courier.close()
        await server.stop()

        let accepted = server.acceptedKeySet
        let missing = acknowledged.filter { !accepted.contains($0.description) }
        #expect(acknowledged.count >= 90)
        #expect(missing.isEmpty, "\(missing.count) of \(acknowledged.count) acknowledged messages never arrived")
        // Each body ("w" and "n") was sent once by its writer: it must reach the server under one
        // key only (a message collected twice would have two ids).
        var keysByBody: [Data: Set<String>] = [:]
        for (key, body) in server.acceptedBodies { keysByBody[body, default: []].insert(key) }
        let twice = keysByBody.values.filter { $0.count > 1 }
        #expect(twice.isEmpty, "\(twice.count) messages arrived under two ids")
        print("""
            extension processes: \(acknowledged.count) acknowledged sends from 18 killed writers, 3 app kills; \
            \(accepted.count) accepted at the server, \(server.statistics.duplicateAccepts) duplicate accepts \
            (same key), 0 missing
            """)
    }
}

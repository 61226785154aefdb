@testable @_spi(CourierTesting) import CourierKit
import CourierLogTesting
import CourierTesting
import FlakyServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The built `courier-load` binary, next to the test bundle.
func courierLoadBinary() -> String {
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<4 where !FileManager.default.fileExists(atPath: dir.appendingPathComponent("courier-load").path) {
        dir = dir.deletingLastPathComponent()
    }
    return dir.appendingPathComponent("courier-load").path
}

/// Runs blocking work (reading a child's pipe, waiting for its exit) on a thread of its own.
/// Never on the cooperative pool: it has as many threads as cores (2 here), so two tests
/// blocked there stall every other async test of the run, and the loopback server the
/// children send to with them (under ThreadSanitizer they were released together ~180 s in).
func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (done: CheckedContinuation<T, Never>) in
        Thread { done.resume(returning: work()) }.start()
    }
}

/// `readAcknowledged(from:atLeast:)` off the cooperative pool; a line that is not an id is
/// recorded as an issue here, in the test's task (a bare thread knows no current test).
func acknowledgements(from pipe: Pipe, atLeast count: Int) async -> [MessageID] {
    let (ids, unexpected) = await onOwnThread { readAcknowledged(from: pipe, atLeast: count) }
    if let unexpected { Issue.record("child said: \(unexpected)") }
    return ids
}

/// Kills `child` with SIGKILL and waits for it to exit, off the cooperative pool.
func killAndWait(_ child: Process) async {
    kill(child.processIdentifier, SIGKILL)
    await onOwnThread { child.waitUntilExit() }
}

/// The ids a `courier-load` child printed (each one a `send` that returned), read until at
/// least `count` arrived or the child's output ended, and the first line that was not an id
/// (reading stops there). Bounded by the child's output. Blocks: call it through
/// `acknowledgements(from:atLeast:)` from async code.
func readAcknowledged(from pipe: Pipe, atLeast count: Int) -> ([MessageID], unexpected: String?) {
    var acknowledged: [MessageID] = []
    var buffer = Data()
    while acknowledged.count < count {
        let chunk = pipe.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        buffer += chunk
        while let newline = buffer.firstIndex(of: 10) {
            let line = String(decoding: buffer[..<newline], as: UTF8.self)
            buffer = Data(buffer[(newline + 1)...])
            guard let id = MessageID(line) else { return (acknowledged, line) }
            acknowledged.append(id)
        }
    }
    return (acknowledged, nil)
}

@Suite struct ProcessCrashTests {
    /// A child process sends 2,000 messages to a flaky server and is killed with SIGKILL after
    /// a few hundred acknowledged sends. A second Courier (this process) opens the directory and
    /// drains it: every message whose `send` returned in the child reaches the server.
    @Test(.timeLimit(.minutes(2)))
    func everyAcknowledgedSendSurvivesSIGKILL() async throws {
        let binary = courierLoadBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build first: make test builds courier-load")
        let server = try await FlakyServer(behavior: .init(failureRate: 0.5, seed: 11))
        let url = await server.url
        let dir = TemporaryDirectory()

        let child = Process()
        child.executableURL = URL(fileURLWithPath: binary)
        child.arguments = [dir.url.path, url.absoluteString, "2000", "1000"]  // 1 ms between sends
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        // Read ids until 300 were acknowledged, then kill mid-stream.
        let acknowledged = await acknowledgements(from: pipe, atLeast: 300)
        await killAndWait(child)
        #expect(child.terminationReason == .uncaughtSignal)
        #expect(acknowledged.count >= 300 && acknowledged.count < 2000, "killed while still sending")

        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        config.retry = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(20))
        let survivor = try Courier(directory: dir.url, configuration: config)
        await survivor.waitUntilIdle()
        for id in acknowledged { try await survivor.delivered(id) }
        await survivor.close()
        await server.stop()
        let accepted = server.acceptedKeySet
        let missing = acknowledged.filter { !accepted.contains($0.description) }
        #expect(missing.isEmpty, "\(missing.count) acknowledged messages never reached the server")
    }

    /// The same promise over random configurations within the documented bounds and random
    /// bodies (empty to `maximumMessageBytes`, compressible or not): a real child process is
    /// killed after a random number of acknowledged sends, and every one is pending when this
    /// process opens the directory with the same settings. The server fails every request, so
    /// nothing leaves the outbox by being delivered.
    @Test(.timeLimit(.minutes(2)), arguments: 0..<3)
    func everyAcknowledgedSendOfARandomConfigurationSurvivesSIGKILL(seed: UInt64) async throws {
        let binary = courierLoadBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build first: make test builds courier-load")
        var rng = SeededRandom(seed: 0x5EED_0000 + seed)
        let config = AcknowledgedSurvivalTests.randomConfiguration(&rng)
        let server = try await FlakyServer(behavior: .init(failureRate: 1, seed: seed))
        let url = await server.url
        let dir = TemporaryDirectory()
        let durability = switch config.durability { case .never: "never"; case .always: "always"; default: "interval" }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: binary)
        child.arguments = [dir.url.path, url.absoluteString, "400", "500",
                           "--segment-size", "\(config.segmentSizeBytes)",
                           "--max-message", "\(config.maximumMessageBytes)",
                           "--durability", durability, "--bodies", "\(seed)"]
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        let killAfter = Int.random(in: 5...80, using: &rng)
        let acknowledged = await acknowledgements(from: pipe, atLeast: killAfter)
        await killAndWait(child)
        await server.stop()
        #expect(acknowledged.count >= killAfter, "the child acknowledged sends before it was killed")

        let (pending, isClean, summary) = try await pendingAfterReopen(dir.url, config)
        let lost = acknowledged.filter { !pending.contains($0) }
        #expect(lost.isEmpty, """
            segment \(config.segmentSizeBytes), max message \(config.maximumMessageBytes), \(durability): \
            lost \(lost.count) of \(acknowledged.count)
            """)
        #expect(isClean, "\(summary)")
    }

    /// Twenty real processes in turn send to the flaky server through one directory of 4 KiB
    /// segments (so each one delivers and compacts while it sends) and are SIGKILLed while
    /// sending, after a random number of acknowledged sends. Then this process drains the
    /// directory. Every acknowledged id reaches the server; a message may arrive twice only if
    /// it was in flight at a kill, so duplicates are at most kills × maximumConcurrentDeliveries.
    @Test(.timeLimit(.minutes(3)))
    func twentyKillsWhileSendingLoseNothingAndDuplicateOnlyWhatWasInFlight() async throws {
        let binary = courierLoadBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build first: make test builds courier-load")
        let server = try await FlakyServer(behavior: .init(failureRate: 0.3, seed: 23))
        let url = await server.url
        let dir = TemporaryDirectory()
        var rng = SeededRandom(seed: 0x4B11_0020)
        var acknowledged: [MessageID] = []
        let rounds = 20
        for round in 0..<rounds {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: binary)
            // 20 ms between sends: deliveries keep up even in a debug build on a loaded machine,
            // so delivered records pile up behind the pending ones and compaction is worth
            // running in most rounds.
            child.arguments = [dir.url.path, url.absoluteString, "100000", "20000",
                               "--segment-size", "4096", "--max-message", "1024"]
            let pipe = Pipe()
            child.standardOutput = pipe
            try child.run()
            let killAfter = Int.random(in: 10...40, using: &rng)
            var seen = await acknowledgements(from: pipe, atLeast: killAfter)
            // On a loaded machine deliveries lag behind sends: keep reading (the child keeps
            // sending) until the server has half of this round's messages, so the child has
            // delivered, rolled and compacted before it dies. Bounded by 200 more sends a round.
            while seen.count < killAfter + 200
                && server.acceptedKeySet.intersection(seen.map(\.description)).count < seen.count / 2
            {
                let more = await acknowledgements(from: pipe, atLeast: 10)
                if more.isEmpty { break }
                seen += more
            }
            await killAndWait(child)
            #expect(child.terminationReason == .uncaughtSignal && seen.count >= killAfter,
                    "round \(round): killed while sending, after \(seen.count) acknowledged sends")
            acknowledged += seen
        }
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
            .filter { $0.hasSuffix(".wal") }.sorted()
        #expect(segments.first != "0000000000000001.wal",
                "compaction forgot the first segments between kills: \(segments.prefix(3))")

        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        config.useSmallestSegments()
        config.retry = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(20))
        let survivor = try Courier(directory: dir.url, configuration: config)
        #expect(survivor.recovery.isClean, "\(survivor.recovery.summary)")
        await survivor.waitUntilIdle()
        await survivor.close()
        await server.stop()
        let accepted = server.acceptedKeySet
        let missing = acknowledged.filter { !accepted.contains($0.description) }
        #expect(missing.isEmpty,
                "\(missing.count) of \(acknowledged.count) acknowledged messages never reached the server")
        let duplicates = server.statistics.duplicateAccepts
        #expect(duplicates <= rounds * Courier.Configuration().maximumConcurrentDeliveries,
                """
                \(duplicates) duplicate deliveries; at most \(rounds) kills × \
                \(Courier.Configuration().maximumConcurrentDeliveries) in flight
                """)
        print("""
            crash rounds: \(rounds) kills, \(acknowledged.count) acknowledged, \(server.statistics.requests) requests, \
            \(duplicates) duplicates, \(segments.count) segments left
            """)
    }
}

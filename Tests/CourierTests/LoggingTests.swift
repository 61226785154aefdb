@testable @_spi(CourierTesting) import CourierKit
import CourierLogTesting
import CourierTesting
import Foundation
import Logging
import Testing

/// `Configuration.logger`: silent by default; levels and metadata as documented; never a
/// body, a header or a token.
@Suite struct LoggingTests {
    @Test func theDefaultLoggerLogsNothing() {
        #expect(Courier.Configuration().logger.handler is SwiftLogNoOpLogHandler)
    }

    @Test func attemptsAreDebugLinesWithMetadataAndADownDestinationIsAWarning() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let lines = LogLines()
        let up = Flag()
        let transport = ScriptedTransport { _ in up.value ? .response(status: 200) : .response(status: 503) }
        var config = testConfiguration(clock: clock, transport: transport)
        config.logger = lines.logger(level: .debug)
        config.prepareRequest = { $0.headers["Authorization"] = "Bearer t0ken" }
        let courier = try Courier(directory: dir.url, configuration: config)
        let ids = try (0..<5).map { try courier.send(["secret-body": $0], to: inbox, headers: ["X-Private": "p"]) }
        await courier.settle()
        up.value = true
        await clock.advance(by: .seconds(1))
        for id in ids { try await courier.delivered(id) }
        await courier.close()

        let all = lines.all
        let starts = all.filter { $0.message == "attempt starting" }
        #expect(starts.count == 10, "five that failed, then the probe and the four it released")
        #expect(starts.allSatisfy { $0.level == .debug && $0.metadata["courier.destination"] == "\(inbox)" })
        #expect(Set(starts.compactMap { $0.metadata["courier.message-id"] }) == Set(ids.map(\.description)))
        #expect(starts.contains { $0.metadata["courier.attempt"] == "2" })
        #expect(all.contains { $0.level == .warning && $0.message.hasPrefix("destination down after 5") })
        #expect(all.contains { $0.level == .info && $0.message.hasPrefix("destination recovered") })
        let text = all.map { "\($0.message) \($0.metadata)" }.joined()
        #expect(!text.contains("secret-body") && !text.contains("X-Private") && !text.contains("t0ken"))
    }

    @Test func damageFoundWhenOpeningIsAWarningAndStorageFailuresAreErrors() async throws {
        let fs = SimulatedFileSystem()
        let lines = LogLines()
        var config = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        config.fileSystem = fs
        config.useSmallestSegments()
        config.logger = lines.logger(level: .info)
        let first = try Courier(directory: URL(fileURLWithPath: "/c"),
                                configuration: { var c = config; c.transport = ParkedTransport(); return c }())
        // Until the log has four segments: the next one is made off the core's lock, so under load
        // a segment can grow past its size before it rolls (bounded: 20 batches of 20).
        first.pause()  // its transport parks every request: nothing runs, settle waits for the log alone
        for batch in 0..<20 where fs.allPaths().filter({ $0.hasSuffix(".wal") }).count < 4 {
            for i in 0..<20 { try first.send(["n": batch * 20 + i], to: inbox) }
            await first.settle()
        }
        await first.close()
        let segments = fs.allPaths().filter { $0.hasSuffix(".wal") }.sorted()
        try #require(segments.count >= 4)
        let bytes = fs.contents(of: segments[1])!
        fs.setContents(Array(bytes.prefix(bytes.count / 2)), of: segments[1])
        let held = ScriptedTransport()
        held.holdResponses = true
        config.transport = held
        let second = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        #expect(lines.all.contains { $0.level == .warning && $0.message.hasPrefix("opening the log found damage")
            && $0.metadata["courier.recovery"] != nil })
        fs.inject(.error(5), on: .write)  // EIO: the first delivered record cannot be written
        held.holdResponses = false
        held.release()
        await second.waitUntilIdle()
        await second.close()
        #expect(lines.all.contains { $0.level == .error && $0.message.hasPrefix("storage failure") },
                "\(lines.all.map(\.message))")
    }
}

/// Never answers until cancelled: everything stays pending.
struct ParkedTransport: DeliveryTransport {
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        try? await Task.sleep(for: .seconds(3600))
        return .failure(TransportFailure(.cancelled, "cancelled"))
    }
}

/// A swift-log handler that keeps every line, for tests.
final class LogLines: @unchecked Sendable {
    struct Line {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let lock = NSLock()
    private var lines: [Line] = []
    var all: [Line] { lock.withLock { lines } }

    func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "test") { _ in Handler(sink: self) }
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ line: Line) { lock.withLock { lines.append(line) } }

    struct Handler: LogHandler {
        let sink: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            sink.append(Line(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}

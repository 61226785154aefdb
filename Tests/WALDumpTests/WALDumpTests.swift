import CourierLog
import CourierLogTesting
import Foundation
import Testing
import WALDumpCore
@_spi(CourierTesting) import CourierKit
import CourierTesting

/// The repository's Fixtures folder, found from this file so tests run from any directory.
let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Fixtures").path
/// The log layer's golden logs, and the messaging layer's records (`courier-v1`: every body kind,
/// so the snapshots pin how wal-dump shows each one).
let expectedVerifyStatus = GoldenLogs.expectedVerifyStatus.merging(["courier-v1": 0]) { a, _ in a }
let goldenNames = expectedVerifyStatus.keys.sorted()

/// A courier's settings for a log these tests dump: a scratch directory in tmp, a manual clock.
func dumpTestConfiguration(_ transport: ScriptedTransport) -> Courier.Configuration {
    var config = Courier.Configuration()
    config.allowsPurgeableDirectory = true
    config.transport = transport
    config.clock = ManualClock()
    return config
}

/// Runs one Dump command on a golden log; returns its status and its output with the
/// directory written as `Fixtures/logs/NAME`, so snapshots do not depend on the checkout path.
func run(_ name: String, _ command: (Dump) -> Dump.Status) -> (Dump.Status, String) {
    let directory = fixtures + "/logs/" + name
    nonisolated(unsafe) var lines: [String] = []
    let dump = Dump(directory: directory, out: { lines.append("out: " + $0) }, err: { lines.append("err: " + $0) })
    let status = command(dump)
    let text = lines.joined(separator: "\n").replacingOccurrences(of: directory, with: "Fixtures/logs/" + name) + "\n"
    return (status, "status: \(status.rawValue)\n" + text)
}

@Suite struct GoldenLogTests {
    /// The writer still produces the committed bytes. If this fails after a deliberate format
    /// change, bump `Format.version`, keep a reader for the old version, and run `make fixtures`.
    @Test func todaysWriterReproducesTheCommittedGoldenLogsByteForByte() throws {
        let fs = SimulatedFileSystem()
        try GoldenLogs.writeAll(root: "/golden", fileSystem: fs)
        let made = fs.allPaths().filter { $0.hasPrefix("/golden/") }
        #expect(made.count == 13)
        for path in made {
            let committed = fixtures + "/logs/" + path.dropFirst("/golden/".count)
            let bytes = try #require(FileManager.default.contents(atPath: committed), "missing \(committed)")
            #expect(Array(bytes) == fs.contents(of: path), "\(committed) differs from what the writer makes")
        }
    }

    /// Records larger than the segment they sit in (they compress well) are valid to every
    /// reader, so opening the log for writing keeps all of them: nothing is cut as a torn tail.
    @Test func recoveryKeepsEveryRecordOfTheLargeRecordLog() throws {
        let fs = SimulatedFileSystem()
        let source = fixtures + "/logs/large-record"
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            fs.setContents(Array(try #require(FileManager.default.contents(atPath: source + "/" + name))),
                           of: "/big/" + name)
        }
        var config = GoldenLogs.configuration()
        config.segmentSizeBytes = Format.minimumSegmentBytes
        let log = try WriteAheadLog(directory: "/big", configuration: config, fileSystem: fs)
        #expect(log.recovery.tornTail == nil && log.recovery.removedSegment == nil)
        var sizes: [Int] = []
        _ = try log.reader.read { sizes.append($0.body.count) }
        #expect(sizes == [20_000, 20_000, 20_000])
        try log.close()
    }

    @Test(arguments: goldenNames)
    func verifyGivesTheDocumentedStatus(name: String) {
        let (status, output) = run(name) { $0.verify() }
        #expect(status.rawValue == expectedVerifyStatus[name], "\(output)")
    }

    @Test(arguments: goldenNames)
    func outputMatchesTheSnapshots(name: String) throws {
        let outputs = [
            ("verify.txt", run(name) { $0.verify() }.1),
            ("records.txt", run(name) { $0.records(json: false, payload: false) }.1),
            ("records.jsonl", run(name) { $0.records(json: true, payload: true) }.1),
            ("stats.txt", run(name) { $0.stats(json: false) }.1),
            ("stats.json", run(name) { $0.stats(json: true) }.1),
        ]
        for (suffix, output) in outputs {
            let path = fixtures + "/snapshots/\(name).\(suffix)"
            if ProcessInfo.processInfo.environment["UPDATE_SNAPSHOTS"] == "1" {
                try FileManager.default.createDirectory(atPath: fixtures + "/snapshots",
                                                        withIntermediateDirectories: true)
                try output.write(toFile: path, atomically: true, encoding: .utf8)
                continue
            }
            let expected = try #require(try? String(contentsOfFile: path, encoding: .utf8),
                                        "missing snapshot \(path); run `make fixtures`")
            #expect(output == expected, "\(path)")
        }
    }

    @Test func jsonRecordsCarryTheKeysExternalChecksParse() throws {
        let (_, output) = run("clean") { $0.records(json: true, payload: false) }
        let lines = output.split(separator: "\n").filter { $0.hasPrefix("out: ") }.map { $0.dropFirst(5) }
        #expect(lines.count == 48)
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect((object["segment"] as? String)?.hasSuffix(".wal") == true)
            #expect(object["offset"] is Int && object["length"] is Int && object["seq"] is Int)
            #expect(["enqueued", "attempted", "delivered", "abandoned", "snapshot"].contains(object["type"] as? String))
            #expect(object["payload"] == nil, "payload is hidden without --payload")
        }
    }

    @Test func offsetsAndLengthsPointAtTheRecordBytes() throws {
        let (_, output) = run("clean") { $0.records(json: true, payload: false) }
        var expectedOffset: [String: Int] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("out: ") {
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.dropFirst(5).utf8)) as? [String: Any])
            let segment = o["segment"] as! String
            let offset = o["offset"] as! Int
            #expect(offset == expectedOffset[segment, default: Format.segmentHeaderSize], "records are contiguous")
            expectedOffset[segment] = offset + (o["length"] as! Int)
        }
        for (segment, end) in expectedOffset {
            let size = try FileManager.default.attributesOfItem(atPath: fixtures + "/logs/clean/" + segment)[.size]
                as! Int
            #expect(end == size)
        }
    }
}

@Suite struct DumpRobustnessTests {
    @Test func anyBytesInAnySegmentFileNeverCrashTheDump() throws {
        var rng = SeededRandom(seed: 99)
        for round in 0..<40 {
            let fs = SimulatedFileSystem()
            try fs.createDirectory(atPath: "/d")
            for f in 0..<Int.random(in: 1...3, using: &rng) {
                let size = Int.random(in: 1...3000, using: &rng)
                fs.setContents((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) },
                               of: "/d/000000000000000\(f).wal")
            }
            let dump = Dump(directory: "/d", fileSystem: fs, out: { _ in }, err: { _ in })
            #expect(dump.verify() == .damaged, "round \(round)")
            #expect(dump.records(json: true, payload: true) == .ok)
            #expect(dump.stats(json: false) == .ok)
        }
    }

    @Test func aMissingDirectoryIsAUsageError() {
        let dump = Dump(directory: "/no/such/dir", out: { _ in }, err: { _ in })
        #expect(dump.verify() == .usage)
        #expect(dump.records(json: false, payload: false) == .usage)
    }

    @Test func iso8601FormattingIsExact() {
        #expect(iso8601(milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(iso8601(milliseconds: 1_763_740_800_123) == "2025-11-21T16:00:00.123Z")
        #expect(iso8601(milliseconds: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
    }
}

@Suite struct LiveLogTests {
    /// wal-dump on a log another thread is appending to, rolling and forgetting: it never
    /// crashes, never reports damage, and sees a growing prefix of the records.
    @Test func dumpingALogWhileItIsWrittenSeesOnlyCompleteRecords() throws {
        let path = NSTemporaryDirectory() + "courier-live-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        var config = WriteAheadLog.Configuration()
        config.segmentSizeBytes = 8192
        let log = try WriteAheadLog(directory: path, configuration: config)
        let writer = Thread {
            for i in 0..<4000 {
                _ = try? log.append(Array("record \(i) ".utf8) + [UInt8](repeating: UInt8(i % 251), count: i % 300),
                                    kind: .enqueued)
                if i % 500 == 499 { _ = try? log.forget(below: UInt64(i - 300)) }
            }
        }
        writer.start()
        var lastCount = 0
        var reads = 0
        while !writer.isFinished || reads < 3 {
            var count = 0
            var previous: UInt64 = 0
            let dump = Dump(directory: path, out: { _ in count += 1 }, err: { line in
                if line.hasPrefix("wal-dump") { Issue.record(Comment(rawValue: line)) }
            })
            let report = try LogReader(directory: path).read { r in
                #expect(r.sequence > previous)
                previous = r.sequence
            }
            #expect(report.isClean, "\(report.damaged)")
            #expect(dump.records(json: true, payload: false) == .ok)
            lastCount = max(lastCount, count)
            reads += 1
            guard reads < 10_000 else { break }
        }
        try log.close()
        #expect(Dump(directory: path, out: { _ in }, err: { _ in }).verify() == .ok)
        #expect(reads >= 3)
    }
}

@Suite struct CourierRecordTests {
    /// A log written by Courier itself: every record names its message, with the id exactly
    /// as sent in Idempotency-Key, and stats splits live from dead.
    @Test func recordsOfACourierLogCarryTheMessageID() async throws {
        let path = NSTemporaryDirectory() + "courier-dump-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        let down = URL(string: "https://down.example/x")!
        let config = dumpTestConfiguration(
            ScriptedTransport { $0.url == down ? .response(status: 503) : .response(status: 200) })
        let courier = try Courier(directory: URL(fileURLWithPath: path), configuration: config)
        let delivered = try courier.send(["a": 1], to: URL(string: "https://example.com/in")!)
        let stuck = try courier.send(["b": 2], to: down)
        try await courier.delivered(delivered)
        // Both attempts have ended (the 503's retry waits on the manual clock): close cancels
        // nothing. (Closing at once after `delivered` raced the 503's attempt, which a busy
        // machine had not yet run: no `attempted` record, under ThreadSanitizer.)
        await courier.settle()
        await courier.close()

        var lines: [String] = []
        #expect(Dump(directory: path, out: { lines.append($0) }, err: { _ in }).records(json: true, payload: false)
                == .ok)
        let objects = try lines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let pairs = objects.map { "\($0["type"]!) \($0["id"]!)" }
        #expect(pairs == ["enqueued \(delivered)", "enqueued \(stuck)", "delivered \(delivered)", "attempted \(stuck)"]
                || pairs
                    == ["enqueued \(delivered)", "enqueued \(stuck)", "attempted \(stuck)", "delivered \(delivered)"])
        #expect(objects.first { ($0["type"] as? String) == "attempted" }?["outcome"] as? String == "HTTP 503")
        var stats: [String] = []
        _ = Dump(directory: path, out: { stats.append($0) }, err: { _ in }).stats(json: false)
        #expect(stats.contains("messages: 1 live, 1 dead (2 records of dead messages)"))
    }

    /// `cancel` writes a record of its own: `wal-dump` names it, counts the message dead, and
    /// verifies the log clean.
    @Test func aCancelledMessageShowsAsACancelledRecord() async throws {
        let path = NSTemporaryDirectory() + "courier-cancel-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        let config = dumpTestConfiguration(ScriptedTransport())
        let courier = try Courier(directory: URL(fileURLWithPath: path), configuration: config)
        courier.pause()
        let id = try courier.send(["a": 1], to: URL(string: "https://example.com/in")!)
        #expect(courier.cancel(id))
        await courier.close()

        var lines: [String] = []
        #expect(Dump(directory: path, out: { lines.append($0) }, err: { _ in }).records(json: true, payload: false)
                == .ok)
        let objects = try lines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { "\($0["type"]!) \($0["id"]!)" } == ["enqueued \(id)", "cancelled \(id)"])
        var stats: [String] = []
        _ = Dump(directory: path, out: { stats.append($0) }, err: { _ in }).stats(json: false)
        #expect(stats.contains("messages: 0 live, 1 dead (2 records of dead messages)"))
        #expect(Dump(directory: path, out: { _ in }, err: { _ in }).verify() == .ok)
    }

    /// A tagged message shows its tags; a hold and a release show their tag (and no message
    /// id); `stats` lists the tags held at the end of the log.
    @Test func tagsAndHoldsShowInRecordsAndStats() async throws {
        let path = NSTemporaryDirectory() + "courier-tags-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        let config = dumpTestConfiguration(ScriptedTransport())
        let courier = try Courier(directory: URL(fileURLWithPath: path), configuration: config)
        courier.hold(tagged: "consent")
        courier.hold(tagged: "account:1")
        courier.release(tagged: "account:1")
        let id = try courier.send(["a": 1], to: URL(string: "https://example.com/in")!, tags: ["consent", "b"])
        await courier.close()

        var lines: [String] = []
        #expect(Dump(directory: path, out: { lines.append($0) }, err: { _ in }).records(json: true, payload: false)
                == .ok)
        let objects = try lines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { "\($0["type"]!) \($0["tag"] ?? "-") \($0["id"] ?? "-")" } == [
            "held consent -", "held account:1 -", "released account:1 -", "enqueued - \(id)",
        ])
        #expect(objects.last?["tags"] as? String == "b,consent")
        var stats: [String] = []
        _ = Dump(directory: path, out: { stats.append($0) }, err: { _ in }).stats(json: false)
        #expect(stats.contains("held tags: consent"))
        var json: [String] = []
        _ = Dump(directory: path, out: { json.append($0) }, err: { _ in }).stats(json: true)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.joined().utf8)) as? [String: Any])
        #expect(object["held_tags"] as? [String] == ["consent"])
        #expect(object["live_messages"] as? Int == 1)
    }

    /// A message handed to a background upload session gets a `handed-off` record naming the
    /// task; its body waits in `bodies/` (owner-only), which `wal-dump` leaves alone.
    @Test func aHandedOffMessageShowsItsTask() async throws {
        let path = NSTemporaryDirectory() + "courier-handoff-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        let session = RecordingSession()
        var config = dumpTestConfiguration(ScriptedTransport())
        config.backgroundUploads = Courier.BackgroundUploads(session: session)
        let courier = try Courier(directory: URL(fileURLWithPath: path), configuration: config)
        courier.pause()
        let id = try courier.send(["a": 1], to: URL(string: "https://example.com/in")!)
        #expect(await courier.appDidEnterBackground() == 1)
        let request = try #require(session.requests.first)
        #expect(request.taskDescription.hasPrefix("courier \(id) 1 "))
        #expect(request.headers["Idempotency-Key"] == id.description)
        let attributes = try FileManager.default.attributesOfItem(atPath: request.bodyFile.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try Data(contentsOf: request.bodyFile) == Data(#"{"a":1}"#.utf8))
        await courier.close()

        var lines: [String] = []
        #expect(Dump(directory: path, out: { lines.append($0) }, err: { _ in }).records(json: true, payload: false)
                == .ok)
        let objects = try lines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { "\($0["type"]!) \($0["id"]!)" } == ["enqueued \(id)", "handed-off \(id)"])
        #expect(objects.last?["task"] as? String == "41")
        #expect(objects.last?["attempt"] as? String == "1")
        #expect(Dump(directory: path, out: { _ in }, err: { _ in }).verify() == .ok)
    }

    /// `prepareRequest` adds a token to every attempt; the log never holds it: `--payload`
    /// shows the body and the headers `send` stored, and no token, in text and JSON.
    @Test func whatPrepareRequestAddsNeverReachesTheLog() async throws {
        let path = NSTemporaryDirectory() + "courier-token-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: path) }
        let transport = ScriptedTransport { $0.attempt == 1 ? .response(status: 401) : .response(status: 200) }
        var config = dumpTestConfiguration(transport)
        config.retry = RetryPolicy(initialDelay: .zero, jitter: .none)
        config.prepareRequest = { request in request.headers["Authorization"] = "Bearer s3cret-\(request.attempt)" }
        let courier = try Courier(directory: URL(fileURLWithPath: path), configuration: config)
        let id = try courier.send(["text": "visible"], to: URL(string: "https://example.com/in")!,
                                  headers: ["X-App": "demo"])
        try await courier.delivered(id)
        await courier.close()
        #expect(transport.requests.map { $0.headers["Authorization"] } == ["Bearer s3cret-1", "Bearer s3cret-2"])
        // JSON: each record's payload (`payload`, or `payload_base64` when binary), decoded.
        var lines: [String] = []
        #expect(Dump(directory: path, out: { lines.append($0) }, err: { _ in }).records(json: true, payload: true)
                == .ok)
        let payloads = try lines.map { line -> String in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            if let text = object["payload"] as? String { return text }
            let base64 = try #require(object["payload_base64"] as? String)
            return String(decoding: try #require(Data(base64Encoded: base64)), as: UTF8.self)
        }
        let decoded = payloads.joined(separator: "\n")
        #expect(payloads.count == 3, "enqueued, attempted, delivered")
        #expect(decoded.contains("visible") && decoded.contains("X-App") && decoded.contains("Content-Type"),
                "the payload is shown")
        #expect(!decoded.contains("s3cret") && !decoded.contains("Authorization"))
        // Text: the same, as written.
        var text: [String] = []
        #expect(Dump(directory: path, out: { text.append($0) }, err: { _ in }).records(json: false, payload: true)
                == .ok)
        #expect(text.count == 3 && !text.joined().contains("s3cret"))
    }
}

/// A background session that records what it is asked to upload and runs nothing.
final class RecordingSession: BackgroundUploadSession, @unchecked Sendable {
    private let lock = NSLock()
    private var made: [BackgroundUploadRequest] = []
    var requests: [BackgroundUploadRequest] { lock.withLock { made } }
    func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask {
        lock.withLock { made.append(request) }
        return BackgroundUploadTask(identifier: 41, taskDescription: request.taskDescription)
    }
    func outstandingTasks() async -> [BackgroundUploadTask] { [] }
    func cancel(_ task: BackgroundUploadTask) {}
    func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void) {}
}

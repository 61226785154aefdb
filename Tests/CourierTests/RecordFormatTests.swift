@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import GoldenRecords
import Testing

/// The messaging layer's record bodies, pinned by golden bytes (`Fixtures/logs/courier-v1`, one
/// record of each kind, written once by `wal-fixtures`). Round trips alone would pass a change
/// made to the encoder and the parser together, and strand every backlog already on disk.
@Suite struct RecordFormatTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/logs/\(GoldenRecords.name)").path

    /// The committed records, read with the one reader.
    func committed() throws -> [LogRecord] {
        var records: [LogRecord] = []
        let report = try LogReader(directory: Self.directory).read { records.append($0.record()) }
        #expect(report.damaged.isEmpty && report.missingSequences == 0)
        return records
    }

    @Test func theCommittedBodiesDecodeToTheirEventsFieldByField() throws {
        let records = try committed()
        #expect(records.map(\.kind) == GoldenRecords.events.map(\.kind))
        for (record, event) in zip(records, GoldenRecords.events) {
            #expect(Event.decode(kind: record.kind, body: record.body) == event, "record \(record.sequence)")
        }
        let kinds = Set(records.map(\.kind))
        let all: Set<RecordKind> = [
            .enqueued, .attempted, .delivered, .abandoned, .snapshot, .cancelled, .handedOff, .held, .released
        ]
        #expect(kinds == all)
    }

    /// Tags came as a trailing field and two new kinds, and replacement keys as a trailing field,
    /// each appended to the fixture: the records written before them are still the committed
    /// log's first bytes, unchanged.
    @Test(arguments: [
        GoldenRecords.untaggedPrefixCount, GoldenRecords.unreplacingPrefixCount, GoldenRecords.unexpiringPrefixCount,
        GoldenRecords.unansweredPrefixCount
    ])
    func theLogBeforeANewFieldIsAPrefixOfTheCommittedLog(records: Int) throws {
        let fs = SimulatedFileSystem()
        try GoldenRecords.write(directory: "/v1", fileSystem: fs, events: GoldenRecords.events.prefix(records))
        let before = try #require(fs.contents(of: "/v1/0000000000000001.wal"))
        let committed = try #require(FileManager.default.contents(atPath: Self.directory + "/0000000000000001.wal"))
        #expect(committed.count > before.count)
        #expect(Array(committed.prefix(before.count)) == before)
    }

    /// A replacement key without an ordering key or tags: the state's fields end with the due
    /// time, then an empty key, a tag count of 0, and the key, `presence`.
    @Test func aReplacingBodyWithoutAKeyOrTagsEndsWithItsReplacementKey() throws {
        let record = try committed()[GoldenRecords.unreplacingPrefixCount]
        guard case .enqueued(let state)? = Event.decode(kind: record.kind, body: record.body) else {
            Issue.record("the fixture's eighteenth record is an enqueued message with a replacement key")
            return
        }
        #expect(state.replacing == "presence" && state.orderingKey == nil && state.tags.isEmpty)
        let tail: [UInt8] = [0x00, 0x00] + [0x00] + [0x08, 0x00] + Array("presence".utf8)
        #expect(Array(record.body.suffix(tail.count)) == tail)
    }

    @Test func todaysEncoderReproducesTheCommittedBodiesByteForByte() throws {
        for (record, event) in zip(try committed(), GoldenRecords.events) {
            #expect(event.encoded() == record.body, "record \(record.sequence) (\(record.kind))")
        }
    }

    @Test func todaysWriterReproducesTheCommittedLogByteForByte() throws {
        let fs = SimulatedFileSystem()
        try GoldenRecords.write(directory: "/v1", fileSystem: fs)
        let made = fs.allPaths().filter { $0.hasPrefix("/v1/") }
        #expect(made == ["/v1/0000000000000001.wal"])
        for path in made {
            let committed = Self.directory + "/" + path.dropFirst("/v1/".count)
            let bytes = try #require(FileManager.default.contents(atPath: committed), "missing \(committed)")
            #expect(Array(bytes) == fs.contents(of: path), "\(committed) differs from what the writer makes")
        }
    }

    /// An expiry without a key, tags or a replacement key: after the due time, an empty key, a tag
    /// count of 0, an empty replacement key, then the expiry, 60,000 ms.
    @Test func anExpiringBodyEndsWithItsExpiry() throws {
        let record = try committed()[GoldenRecords.unexpiringPrefixCount]
        guard case .enqueued(let state)? = Event.decode(kind: record.kind, body: record.body) else {
            Issue.record("the fixture's twenty-second record is an enqueued message with an expiry")
            return
        }
        #expect(state.expiryMilliseconds == 60_000 && state.replacing == nil && state.tags.isEmpty)
        let tail: [UInt8] = [0x00, 0x00] + [0x00] + [0x00, 0x00] + [0x60, 0xea, 0, 0, 0, 0, 0, 0]
        #expect(Array(record.body.suffix(tail.count)) == tail)
    }

    /// The server's answer after a `delivered` record's status: one header (`Location: /m/7`), then
    /// the body as a blob, `{"id":7}`.
    @Test func anAnsweredDeliveredBodyEndsWithItsHeadersAndBody() throws {
        let record = try committed()[GoldenRecords.unansweredPrefixCount + 1]
        guard case .delivered(_, 1, 201, let headers, let body)? = Event.decode(kind: record.kind, body: record.body)
        else {
            Issue.record("the fixture's twenty-fifth record is a delivered message with an answer")
            return
        }
        #expect(headers == [Header(name: "Location", value: "/m/7")] && body == Array(#"{"id":7}"#.utf8))
        let tail: [UInt8] =
            [0xc9, 0x00, 0x01] + [0x08, 0x00] + Array("Location".utf8) + [0x04, 0x00] + Array("/m/7".utf8)
            + [0x08, 0, 0, 0] + Array(#"{"id":7}"#.utf8)
        #expect(Array(record.body.suffix(tail.count)) == tail)
    }

    /// ARCHITECTURE.md's worked example of an `enqueued` body, byte for byte.
    @Test func theFirstEnqueuedBodyIsArchitecturesWorkedExample() throws {
        let hex =
            "01" + "0a1b2c3d4e5f46078899aabbccddeeff"  // version, id
            + "1900" + "68747470733a2f2f6578616d706c652e636f6d2f696e626f78"  // URL (25 bytes)
            + "02" + "0c00" + "436f6e74656e742d54797065" + "1000" + "6170706c69636174696f6e2f6a736f6e"  // headers
            + "0700" + "582d5472616365" + "0300" + "742d31"
            + "0d000000" + "7b2274657874223a226869227d"  // body (13 bytes)
            + "00d424a79a010000" + "00000000" + "00d424a79a010000"  // created ms, attempts, next due ms
        let expected = stride(from: 0, to: hex.count, by: 2).map { i -> UInt8 in
            let start = hex.index(hex.startIndex, offsetBy: i)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
        #expect(expected.count == 128)
        #expect(try committed().first?.body == expected)
    }

    /// ARCHITECTURE.md's example of tags without a key: the state's fields end with the due
    /// time, then an empty key, one tag, `account:1`.
    @Test func aTaggedBodyWithoutAKeyIsArchitecturesExample() throws {
        guard case .enqueued(let tagged) = GoldenRecords.events[10], tagged.orderingKey == nil else {
            Issue.record("the fixture's eleventh record is a tagged message without a key")
            return
        }
        let record = try committed()[10]
        #expect(Event.decode(kind: record.kind, body: record.body)?.id == tagged.id)
        let tail: [UInt8] =
            [0x00, 0xd4, 0x24, 0xa7, 0x9a, 0x01, 0x00, 0x00] + [0x00, 0x00] + [0x01]
            + [0x09, 0x00] + Array("account:1".utf8)
        #expect(Array(record.body.suffix(tail.count)) == tail)
    }

    /// Replay reads the records as a courier would: the first message delivered, the keyed one
    /// abandoned, the cancel of an unknown id ignored, the tagged ones cancelled and delivered,
    /// the tag held and released, the replaced one cancelled by the one replacing it. Nothing is
    /// pending, nothing held.
    @Test func aCourierReplaysTheCommittedRecords() async throws {
        let scratch = TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Self.directory, toPath: scratch.url.path)
        let held = ScriptedTransport()
        held.holdResponses = true
        let courier = try Courier(
            directory: scratch.url, configuration: testConfiguration(clock: ManualClock(), transport: held))
        #expect(courier.pendingCount == 0)
        #expect(courier.recovery.isClean, "\(courier.recovery.summary)")
        guard case .enqueued(let first) = GoldenRecords.events[0], case .enqueued(let keyed) = GoldenRecords.events[1]
        else { Issue.record("the fixture begins with two enqueued records"); return }
        try await courier.delivered(first.id)
        await #expect(throws: CourierError.self) { try await courier.delivered(keyed.id) }
        guard case .enqueued(let keyedTagged) = GoldenRecords.events[11] else {
            Issue.record("the fixture's twelfth record is the keyed, tagged message")
            return
        }
        #expect(keyedTagged.tags == ["account:1", "consent"])
        try await courier.delivered(keyedTagged.id)
        #expect(courier.heldTags.isEmpty)
        guard case .enqueued(let replaced) = GoldenRecords.events[GoldenRecords.unreplacingPrefixCount] else {
            Issue.record("the fixture's eighteenth record is the replaced message")
            return
        }
        await #expect(throws: CourierError.self, "withdrawn by the next record") {
            try await courier.delivered(replaced.id) as ServerAnswer
        }
        await courier.close()
    }
}

import CourierKit
import CourierLog
import CourierLogTesting
import Foundation

/// The messaging layer's golden records (`Fixtures/logs/courier-v1`): one record of each kind,
/// full states with and without an ordering key, with tags (with and without a key), with a
/// replacement key (the second withdrawing the first), with an expiry, a `delivered` with the
/// server's answer,
/// `attempted` with both outcome forms, encoded
/// by today's `Event.encoded()` into a log made with the golden settings (fixed salt and
/// time). `wal-fixtures courier DIR` writes it once; `RecordFormatTests` decode the committed
/// bytes field by field and require today's encoder to reproduce them, so a change made to
/// the encoder and the parser together cannot strand a backlog already on disk.
///
/// Not a product: a target of this package's tools and tests only.
package enum GoldenRecords {
    /// The fixture's directory name under `Fixtures/logs`.
    package static let name = "courier-v1"

    static let id = MessageID(UUID(uuidString: "0A1B2C3D-4E5F-4607-8899-AABBCCDDEEFF")!)
    static let keyedID = MessageID(UUID(uuidString: "11111111-2222-4333-8444-555555555555")!)
    static let taggedID = MessageID(UUID(uuidString: "22222222-3333-4444-8555-666666666666")!)
    static let keyedTaggedID = MessageID(UUID(uuidString: "33333333-4444-4555-8666-777777777777")!)
    static let replacedID = MessageID(UUID(uuidString: "44444444-5555-4666-8777-888888888888")!)
    static let replacingID = MessageID(UUID(uuidString: "55555555-6666-4777-8888-999999999999")!)
    static let expiringID = MessageID(UUID(uuidString: "66666666-7777-4888-8999-aaaaaaaaaaaa")!)
    static let answeredID = MessageID(UUID(uuidString: "77777777-8888-4999-8aaa-bbbbbbbbbbbb")!)
    static let createdMilliseconds: UInt64 = 1_763_740_800_000  // 2025-11-21T16:00:00Z

    /// A message's full state as `send` records it: `Content-Type` first, the app's headers
    /// sorted after it.
    static func state(
        _ id: MessageID, key: String?, tags: [String] = [], attempts: UInt32 = 0, due: UInt64? = nil,
        replacing: String? = nil, expiry: UInt64? = nil
    ) -> MessageState {
        MessageState(
            id: id, url: "https://example.com/inbox",
            headers: [Header(name: "Content-Type", value: "application/json"), Header(name: "X-Trace", value: "t-1")],
            body: Array(#"{"text":"hi"}"#.utf8), createdMilliseconds: createdMilliseconds, attempts: attempts,
            nextDueMilliseconds: due ?? createdMilliseconds, orderingKey: key, tags: tags, replacing: replacing,
            expiryMilliseconds: expiry)
    }

    /// The records, in log order: what the committed bodies must decode to. The tagged records
    /// and the tag records (`held`, `released`) came with tags and were appended after the
    /// first ten, whose bytes did not change: the log of ten is a prefix of this one.
    package static let events: [Event] = [
        .enqueued(state(id, key: nil)),
        .enqueued(state(keyedID, key: "chat-42")),
        .attempted(
            id, attempt: 1, outcome: .response(status: 503, retryAfter: "5"),
            nextDueMilliseconds: createdMilliseconds + 5_000),
        .attempted(
            keyedID, attempt: 1, outcome: .failure(TransportFailure(.timeout, "request timed out")),
            nextDueMilliseconds: createdMilliseconds + 1_000),
        .snapshot(state(id, key: nil, attempts: 1, due: createdMilliseconds + 5_000)),
        .snapshot(state(keyedID, key: "chat-42", attempts: 1, due: createdMilliseconds + 1_000)),
        .handedOff(
            id,
            HandOff(
                attempt: 2, ticket: 0x0123_4567_89AB_CDEF, taskIdentifier: 42,
                earliestBeginMilliseconds: createdMilliseconds + 5_000)),
        .delivered(id, attempt: 2, status: 200),
        .abandoned(keyedID, attempt: 3, reason: "gave up after 3 attempts"),
        .cancelled(MessageID(UUID(uuidString: "FFFFFFFF-0000-4000-8000-000000000001")!)),
        .enqueued(state(taggedID, key: nil, tags: ["account:1"])),
        .enqueued(state(keyedTaggedID, key: "chat-42", tags: ["account:1", "consent"])),
        .held(tag: "account:1"),
        .snapshot(state(taggedID, key: nil, tags: ["account:1"])),
        .released(tag: "account:1"),
        .cancelled(taggedID),
        .delivered(keyedTaggedID, attempt: 1, status: 201),
        .enqueued(state(replacedID, key: nil, replacing: "presence")),
        .enqueued(state(replacingID, key: "chat-42", tags: ["account:1"], replacing: "presence")),
        .snapshot(state(replacingID, key: "chat-42", tags: ["account:1"], replacing: "presence")),
        .delivered(replacingID, attempt: 1, status: 200),
        .enqueued(state(expiringID, key: nil, expiry: 60_000)),
        .abandoned(expiringID, attempt: 1, reason: "expired"),
        .enqueued(state(answeredID, key: nil)),
        .delivered(
            answeredID, attempt: 1, status: 201, headers: [Header(name: "Location", value: "/m/7")],
            body: Array(#"{"id":7}"#.utf8))
    ]

    /// How many records the log held before tags, and before replacement keys: each log is a
    /// prefix of today's, byte for byte.
    package static let untaggedPrefixCount = 10
    package static let unreplacingPrefixCount = 17
    package static let unexpiringPrefixCount = 21
    package static let unansweredPrefixCount = 23

    /// Writes the log: each event as its own record, in the golden settings.
    package static func write(
        directory: String, fileSystem: any LogFileSystem, events: some Sequence<Event> = events
    ) throws {
        let log = try WriteAheadLog(
            directory: directory, configuration: GoldenLogs.configuration(), fileSystem: fileSystem)
        for event in events { try log.append(event.encoded(), kind: event.kind) }
        try log.close()
        try fileSystem.removeFile(atPath: directory + "/" + Format.lockFileName)  // empty; not part of the format
    }
}

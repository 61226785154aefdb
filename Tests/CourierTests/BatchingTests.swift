@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// `DestinationOptions.batching`: several messages in one POST, as a JSON array of their keys
/// and bodies, under a key of the batch's own; each message keeps its id, events and verdict.
@Suite(.timeLimit(.minutes(1))) struct BatchingTests {
    struct Item: Decodable, Equatable {
        var key: String
        var body: [String: Int]
    }

    func open(
        _ directory: URL, _ clock: ManualClock, _ transport: ScriptedTransport,
        count: Int = 50, bytes: Int = 1 << 20, edit: (inout Courier.Configuration) -> Void = { _ in }
    ) throws -> Courier {
        var configuration = testConfiguration(clock: clock, transport: transport)
        configuration.destinations["https://example.com"] = DestinationOptions(
            batching: Batching(maximumCount: count, maximumBytes: bytes, maximumDelay: .seconds(1)))
        edit(&configuration)
        return try Courier(directory: directory, configuration: configuration)
    }

    func items(_ request: DeliveryRequest) throws -> [Item] {
        try JSONDecoder().decode([Item].self, from: request.body)
    }

    /// The target, in virtual time: 1,000 messages at 0% failures, batches of 50, take
    /// at most 0.03 requests each.
    @Test func aThousandMessagesGoInTwentyRequestsOfFiftyEach() async throws {
        let temporary = TemporaryDirectory()
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        let courier = try open(temporary.url, clock, transport)
        let ids = try (0..<1_000).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        #expect(transport.requests.isEmpty, "the first attempt waits maximumDelay for company")
        await clock.advance(by: .seconds(1))
        for id in ids { try await courier.delivered(id) }
        #expect(transport.requests.count == 20 && transport.requests.allSatisfy { $0.batch.count == 50 })
        let sent = try transport.requests.flatMap { try items($0) }
        #expect(sent.map(\.key) == transport.requests.flatMap(\.batch).map(\.description), "keys in body order")
        #expect(Set(sent.map(\.key)) == Set(ids.map(\.description)) && sent.count == 1_000, "each message once")
        #expect(sent.allSatisfy { ids[$0.body["n"]!].description == $0.key }, "each body under its own key")
        #expect(transport.requests.allSatisfy { $0.messageID == $0.batch[0] })
        await courier.close()
    }

    /// The bytes target, in virtual time: gzip on batches of 50 of the bench's messages
    /// puts at most 40% of their bytes one by one on the wire (`make bench-batching`: 29%).
    @Test func aGzippedBatchOfFiftyBenchMessagesIsUnderFortyPercentOfTheirBytes() async throws {
        let temporary = TemporaryDirectory()
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        let courier = try open(temporary.url, clock, transport) {
            $0.destinations["https://example.com"]?.gzip = true
        }
        let messages = (0..<50).map { i -> [String: Any] in
            ["text": "message number \(i) with a little payload, typical of a chat or analytics event", "n": i]
        }
        let ids = try messages.map { try courier.send($0, to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        for id in ids { try await courier.delivered(id) }
        let request = try #require(transport.requests.first)
        #expect(transport.requests.count == 1 && request.headers["Content-Encoding"] == "gzip")
        let plain = try messages.map { try JSONBody.serialize($0).count }.reduce(0, +)
        #expect(Double(request.body.count) <= 0.4 * Double(plain), "\(request.body.count) of \(plain) bytes")
        let items = try JSONSerialization.jsonObject(with: GzipTests.gunzip(request.body) ?? Data()) as? [Any]
        #expect(items?.count == 50)
        await courier.close()
    }

    @Test func aFailedBatchIsEachMessagesFailedAttemptAndItsRetryKeepsTheBatchKey() async throws {
        let temporary = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt == 1 ? .response(status: 500) : .response(status: 200) }
        let courier = try open(temporary.url, clock, transport) {
            $0.retry = RetryPolicy(initialDelay: .seconds(1), jitter: .none)
        }
        let events = EventLog(courier.events())
        let ids = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        await courier.settle()
        await clock.advance(by: .seconds(1))
        for id in ids { try await courier.delivered(id) }
        let keys = transport.requests.map { $0.headers["Idempotency-Key"] ?? "" }
        #expect(transport.requests.count == 2 && transport.requests.allSatisfy { $0.batch == ids })
        #expect(keys[0] == keys[1] && keys[0].hasPrefix("batch-"), "\(keys)")
        await courier.close()
        await events.finish()
        for id in ids {
            #expect(events.events.contains { if case .failed(id, 1, _, _?) = $0 { true } else { false } })
            #expect(events.events.contains(.delivered(id, attempts: 2)))
        }
    }

    /// `batchItemStatuses`: the server's 2xx answer to a batch says how each message went; each
    /// is judged by its own status (201 delivered, 500 retried, 400 abandoned under
    /// `.giveUpOnClientErrors`), one it leaves out by the request's.
    @Test func aBatchsAnswerPerMessageIsJudgedMessageByMessage() async throws {
        let temporary = TemporaryDirectory()
        let clock = ManualClock()
        let requests = Locked(0)
        let transport = ScriptedTransport(answering: { request in
            let first = requests.withLock { $0 += 1; return $0 == 1 }
            let items = (try? JSONSerialization.jsonObject(with: request.body)) as? [[String: Any]] ?? []
            var statuses: [String: Int] = [:]
            for item in items {
                let n = (item["body"] as? [String: Any])?["n"] as? Int ?? 0
                if n < 3 { statuses[item["key"] as? String ?? ""] = first ? [201, 500, 400][n] : 201 }
            }
            return ServerAnswer(status: 200, body: (try? JSONEncoder().encode(statuses)) ?? Data())
        })
        let courier = try open(temporary.url, clock, transport) { c in
            c.retry = RetryPolicy(initialDelay: .seconds(1), jitter: .none, classifier: .giveUpOnClientErrors)
            c.batchItemStatuses = batchItemStatuses().batchItemStatuses  // UsingCourier's example
        }
        let ids = try (0..<4).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        await courier.settle()
        await clock.advance(by: .seconds(1))
        #expect(try await courier.delivered(ids[0]).status == 201, "201 in the answer: delivered")
        #expect(try await courier.delivered(ids[1]).status == 200, "500: retried alone, then delivered")
        await #expect(throws: CourierError.self) { try await courier.delivered(ids[2]) as ServerAnswer }
        #expect(try await courier.delivered(ids[3]).status == 200, "left out: the request's 200")
        #expect(transport.requests.map(\.batch.count) == [4, 0], "the retry went alone")
        await courier.close()
    }

    @Test func anAppsBatchBodyReplacesTheArrayAndKeepsTheBatchKey() async throws {
        let temporary = TemporaryDirectory()
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        let courier = try open(temporary.url, clock, transport) { $0.batchBody = batchBody().batchBody }
        let ids = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        for id in ids { try await courier.delivered(id) }
        let request = try #require(transport.requests.first)
        #expect(String(decoding: request.body, as: UTF8.self) == "{\"n\":0}\n{\"n\":1}\n{\"n\":2}")
        #expect(request.batch == ids && request.headers["Idempotency-Key"]?.hasPrefix("batch-") == true)
        await courier.close()
    }

    /// A batch's messages are never stuck in flight: its leader cancelled while the request is
    /// under way leaves the others judged by the answer; a close under way leaves every one
    /// pending, as on disk, for the next run.
    @Test func aCancelledLeaderStillResolvesItsRidersAndACloseLeavesThemPending() async throws {
        let temporary = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let courier = try open(temporary.url, clock, transport)
        let ids = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        await transport.waitForRequests(1)
        #expect(courier.cancel(ids[0]))
        transport.release()
        for id in ids.dropFirst() { try await courier.delivered(id) }
        await #expect(throws: CourierError.self) { try await courier.delivered(ids[0]) as ServerAnswer }

        let later = try (3..<5).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        await transport.waitForRequests(2)
        #expect(transport.requests.last?.batch == later)
        await courier.close()  // the held request is cancelled: not an attempt

        let again = try open(temporary.url, ManualClock(), ScriptedTransport())
        #expect(await again.pendingMessages().map(\.id) == later)
        #expect(await again.pendingMessages().allSatisfy { $0.attempts == 0 }, "as on disk")
        await again.close()
    }

    @Test func messagesWithHeadersOfTheirOwnGoAloneAndTagsAreNeverMixed() async throws {
        let temporary = TemporaryDirectory()
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        let courier = try open(temporary.url, clock, transport)
        let plain = try (0..<2).map { try courier.send(["n": $0], to: inbox) }
        let headed = try courier.send(["n": 2], to: inbox, headers: ["X-Account": "a"])
        let tagged = try (3..<5).map { try courier.send(["n": $0], to: inbox, tags: ["account-a"]) }
        let other = try courier.send(["n": 5], to: URL(string: "https://example.com/other")!)
        await courier.settle()
        await clock.advance(by: .seconds(1))
        for id in plain + [headed] + tagged + [other] { try await courier.delivered(id) }
        let batches = Set(transport.requests.map { $0.batch.isEmpty ? [$0.messageID] : $0.batch })
        #expect(batches == [plain, [headed], tagged, [other]])
        await courier.close()
    }

    @Test func orderingKeysHoldAcrossBatches() async throws {
        let temporary = TemporaryDirectory()
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        let courier = try open(temporary.url, clock, transport)
        let keyed = try (0..<3).map { try courier.send(["n": $0], to: inbox, orderingKey: "chat") }
        let free = try courier.send(["n": 3], to: inbox)
        await courier.settle()
        await clock.advance(by: .seconds(1))
        for id in keyed + [free] { try await courier.delivered(id) }
        let order = transport.requests.flatMap { $0.batch.isEmpty ? [$0.messageID] : $0.batch }.filter(keyed.contains)
        #expect(order == keyed)
        #expect(transport.requests.count == 3, "one of the key's messages per request")
        await courier.close()
    }

    @Test func maximumBytesSplitsABatchAndTheRestGoesNext() async throws {
        let temporary = TemporaryDirectory()
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        let courier = try open(temporary.url, clock, transport, bytes: 20)  // `{"n":0}` is 7 bytes
        let ids = try (0..<5).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        for id in ids { try await courier.delivered(id) }
        #expect(transport.requests.map(\.batch.count).sorted() == [0, 2, 2], "\(transport.requests.map(\.batch))")
        await courier.close()
    }

    @Test(arguments: [(0, 1, 0), (2, 0, 0), (2, 1, -1)])
    func aBatchingOutOfRangeIsRefusedWhenOpening(count: Int, bytes: Int, delay: Int) {
        var configuration = Courier.Configuration()
        configuration.destinations["https://example.com"] = DestinationOptions(
            batching: Batching(maximumCount: count, maximumBytes: bytes, maximumDelay: .seconds(delay)))
        let temporary = TemporaryDirectory()
        #expect(throws: CourierError.self) { try Courier(directory: temporary.url, configuration: configuration) }
    }
}

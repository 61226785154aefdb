@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// The server's answer to a delivered message (`ServerAnswer`): from `delivered(_:)`, with the
/// headers `answerHeaders` names and the body's first 16 KiB, also after a restart (read back
/// from the `delivered` record), and for each message of a batch.
@Suite(.timeLimit(.minutes(1))) struct ServerAnswerTests {
    static func answer(_ request: DeliveryRequest) -> ServerAnswer {
        let id = request.batch.isEmpty ? request.messageID.description : "batch"
        return ServerAnswer(
            status: 201, headers: ["Location": "/m/\(id)", "Server": "test"], body: Data(#"{"id":"\#(id)"}"#.utf8))
    }

    func open(_ directory: URL, _ transport: ScriptedTransport, edit: (inout Courier.Configuration) -> Void = { _ in })
        throws -> Courier
    {
        var configuration = testConfiguration(clock: ManualClock(), transport: transport)
        configuration.answerHeaders = ["location"]
        edit(&configuration)
        return try Courier(directory: directory, configuration: configuration)
    }

    @Test func deliveredReturnsTheStatusTheChosenHeadersAndTheBodyAlsoAfterAReopen() async throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url, ScriptedTransport(answering: Self.answer))
        let id = try courier.send(["text": "hi"], to: inbox)
        let expected = ServerAnswer(
            status: 201, headers: ["location": "/m/\(id)"], body: Data(#"{"id":"\#(id)"}"#.utf8))
        #expect(try await courier.delivered(id) == expected)
        #expect(try await courier.delivered(id) == expected, "again, read back from the log")
        await courier.close()

        let again = try open(temporary.url, ScriptedTransport())
        #expect(try await again.delivered(id) == expected, "in a later run, from the delivered record")
        await again.close()
    }

    @Test func aLongBodyIsKeptToItsFirst16KiBAndAServerWithoutOneGivesTheStatus() async throws {
        let temporary = TemporaryDirectory()
        let long = Data(repeating: UInt8(ascii: "x"), count: 40_000)
        let courier = try open(
            temporary.url, ScriptedTransport(answering: { _ in ServerAnswer(status: 200, body: long) }))
        let id = try courier.send(["n": 1], to: inbox)
        #expect(try await courier.delivered(id).body == long.prefix(ServerAnswer.maximumBodyBytes))
        await courier.close()

        let plain = try open(TemporaryDirectory().url, ScriptedTransport { _ in .response(status: 204) })
        let other = try plain.send(["n": 2], to: inbox)
        #expect(try await plain.delivered(other) == ServerAnswer(status: 204))
        await plain.close()
    }

    @Test func eachMessageOfABatchGetsTheBatchsAnswer() async throws {
        let temporary = TemporaryDirectory()
        let clock = ManualClock()
        var configuration = testConfiguration(clock: clock, transport: ScriptedTransport(answering: Self.answer))
        configuration.destinations["https://example.com"] = DestinationOptions(
            batching: Batching(maximumCount: 10, maximumBytes: 1 << 20, maximumDelay: .seconds(1)))
        let courier = try Courier(directory: temporary.url, configuration: configuration)
        let ids = try (0..<3).map { try courier.send(["n": $0], to: inbox) }
        await courier.settle()
        await clock.advance(by: .seconds(1))
        for id in ids { #expect(try await courier.delivered(id).body == Data(#"{"id":"batch"}"#.utf8)) }
        await courier.close()
    }
}

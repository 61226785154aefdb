@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// `send(_:to:orderingKey:)`: same key, send order; different keys never wait for each other.
@Suite struct OrderingKeyTests {
    /// Conversation "a" fails its first message twice; its second waits for it, while
    /// conversation "b" and unkeyed messages go at once.
    @Test func aKeyIsDeliveredInSendOrderAndOtherKeysNeverWait() async throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport { request in
            String(decoding: request.body, as: UTF8.self).contains("a1") && request.attempt < 3
                ? .response(status: 500) : .response(status: 200)
        }
        let courier = try Courier(directory: dir.url,
                                  configuration: testConfiguration(clock: clock, transport: transport))
        let a1 = try courier.send(["m": "a1"], to: inbox, orderingKey: "a")
        let a2 = try courier.send(["m": "a2"], to: inbox, orderingKey: "a")
        let b1 = try courier.send(["m": "b1"], to: inbox, orderingKey: "b")
        let b2 = try courier.send(["m": "b2"], to: inbox, orderingKey: "b")
        let free = try courier.send(["m": "free"], to: inbox)
        for id in [b1, b2, free] { try await courier.delivered(id) }
        await courier.settle()
        // What the API promises, not one interleaving: the heads of "a", "b" and the unkeyed
        // message start together (in any order); b2 follows b1's delivery; a2 waits for a1.
        let first = bodies(transport)
        #expect(first.count == 4 && Set(first) == ["a1", "b1", "free", "b2"], "a2 waits behind a1: \(first)")
        #expect((first.firstIndex(of: "b1") ?? .max) < (first.firstIndex(of: "b2") ?? .min),
                "b2 only after b1: \(first)")
        await clock.advance(by: .seconds(1))
        await courier.settle()
        await clock.advance(by: .seconds(2))
        try await courier.delivered(a2)
        #expect(bodies(transport).filter { $0.hasPrefix("a") } == ["a1", "a1", "a1", "a2"])
        #expect(try await isDelivered(courier, a1))
        await courier.close()
    }

    /// The key is on disk: after a restart the second message still waits for the first,
    /// and `pendingMessages` shows the key.
    @Test func orderIsKeptAcrossARestart() async throws {
        let dir = TemporaryDirectory()
        var config = testConfiguration(clock: ManualClock(),
                                       transport: ScriptedTransport { _ in .response(status: 503) })
        config.destinationBackoff = .disabled
        var courier = try Courier(directory: dir.url, configuration: config)
        try courier.send(["m": "first"], to: inbox, orderingKey: "chat-7")
        try courier.send(["m": "second"], to: inbox, orderingKey: "chat-7")
        await courier.settle()
        await courier.close()

        let transport = ScriptedTransport()
        transport.holdResponses = true
        config = testConfiguration(clock: ManualClock(), transport: transport)
        courier = try Courier(directory: dir.url, configuration: config)
        #expect(await courier.pendingMessages().map(\.orderingKey) == ["chat-7", "chat-7"])
        courier.retryNow()
        await transport.waitForRequests(1)
        // One pump takes everything due at once: had the second been schedulable, it would be
        // in flight too.
        #expect(courier.inFlightCount == 1)
        #expect(bodies(transport) == ["first"], "the second waits for the first")
        transport.holdResponses = false
        transport.release()
        await courier.waitUntilIdle()
        #expect(bodies(transport) == ["first", "second"])
        await courier.close()
    }

    /// In `.fifoPerDestination` an unkeyed message is ordered by its URL, and a keyed one by its
    /// key: the special case "key = destination" and an explicit key side by side.
    @Test func fifoPerDestinationIsTheKeyThatIsTheURL() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.deliveryOrder = .fifoPerDestination
        let courier = try Courier(directory: dir.url, configuration: config)
        try courier.send(["m": "u1"], to: inbox)
        try courier.send(["m": "u2"], to: inbox)
        try courier.send(["m": "k1"], to: inbox, orderingKey: "k")
        try courier.send(["m": "k2"], to: inbox, orderingKey: "k")
        await transport.waitForRequests(2)
        #expect(Set(bodies(transport)) == ["u1", "k1"])
        transport.holdResponses = false
        transport.release()
        await courier.waitUntilIdle()
        let order = bodies(transport)
        #expect(order.firstIndex(of: "u1")! < order.firstIndex(of: "u2")!
                && order.firstIndex(of: "k1")! < order.firstIndex(of: "k2")!)
        await courier.close()
    }

    @Test func aKeyIsOneToOneThousandTwentyFourBytes() throws {
        let dir = TemporaryDirectory()
        let courier = try Courier(
            directory: dir.url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        for bad in ["", String(repeating: "é", count: 513)] {
            #expect(throws: CourierError.self) { try courier.send(["m": 1], to: inbox, orderingKey: bad) }
        }
        #expect(throws: Never.self) {
            try courier.send(data: Data([1]), contentType: "application/octet-stream", to: inbox,
                             orderingKey: String(repeating: "k", count: 1024))
        }
    }

    @Test func aKeyRoundTripsThroughTheRecordAndAMessageWithoutOneIsUnchanged() throws {
        let keyed = MessageState(id: MessageID(), url: "https://example.com/x", headers: [], body: [1, 2],
                                 createdMilliseconds: 5, nextDueMilliseconds: 6, orderingKey: "conversation/42")
        var plain = keyed
        plain.orderingKey = nil
        #expect(Event.decode(kind: .enqueued, body: Event.enqueued(keyed).encoded()) == .enqueued(keyed))
        #expect(Event.decode(kind: .snapshot, body: Event.snapshot(plain).encoded()) == .snapshot(plain))
        #expect(Event.enqueued(keyed).encoded().count == Event.enqueued(plain).encoded().count + 2 + 15)
    }

    private func bodies(_ transport: ScriptedTransport) -> [String] {
        transport.requests.map { request in
            let object = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any]
            return object?["m"] as? String ?? "?"
        }
    }

    private func isDelivered(_ courier: Courier, _ id: MessageID) async throws -> Bool {
        try await courier.delivered(id)
        return true
    }
}

import CourierKit
import Foundation

/// What the screen needs from the library. `CourierGateway` is the real one; tests use a fake.
public protocol SampleGateway: Sendable {
    func send(text: String, to server: URL) throws -> MessageID
    /// The pending messages now, and every event after that instant (none missed between).
    func pendingMessagesAndEvents() async -> (pending: [PendingMessage], events: AsyncStream<CourierEvent>)
    func close() async
}

/// Sends `{"text": …}` through a `Courier`.
public struct CourierGateway: SampleGateway {
    public let courier: Courier

    public init(courier: Courier) {
        self.courier = courier
    }

    public func send(text: String, to server: URL) throws -> MessageID { try courier.send(["text": text], to: server) }
    public func pendingMessagesAndEvents() async -> (pending: [PendingMessage], events: AsyncStream<CourierEvent>) {
        await courier.pendingMessagesAndEvents()
    }
    public func close() async { await courier.close() }
}

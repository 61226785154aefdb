import Courier
import Foundation

/// What the screen needs from the library. `CourierGateway` is the real one; tests use a fake.
public protocol SampleGateway: Sendable {
    func send(text: String, to server: URL) throws -> MessageID
    var events: AsyncStream<CourierEvent> { get }
    var pendingMessages: [PendingMessage] { get }
    func close() async
}

/// Sends `{"text": …}` through a `Courier`.
public struct CourierGateway: SampleGateway {
    public let courier: Courier

    public init(courier: Courier) {
        self.courier = courier
    }

    public func send(text: String, to server: URL) throws -> MessageID { try courier.send(["text": text], to: server) }
    public var events: AsyncStream<CourierEvent> { courier.events }
    public var pendingMessages: [PendingMessage] { courier.pendingMessages }
    public func close() async { await courier.close() }
}

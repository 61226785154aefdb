import Courier
import Foundation

/// What the screen needs from the library. `CourierGateway` is the real one; tests use a fake.
public protocol SampleGateway: Sendable {
    func send(text: String) throws -> MessageID
    var events: AsyncStream<CourierEvent> { get }
    var pendingMessages: [PendingMessage] { get }
    func close() async
}

/// Sends `{"text": …}` to one URL through a `Courier`.
public struct CourierGateway: SampleGateway {
    public let courier: Courier
    public let url: URL

    public init(courier: Courier, url: URL) {
        self.courier = courier
        self.url = url
    }

    public func send(text: String) throws -> MessageID { try courier.send(["text": text], to: url) }
    public var events: AsyncStream<CourierEvent> { courier.events }
    public var pendingMessages: [PendingMessage] { courier.pendingMessages }
    public func close() async { await courier.close() }
}

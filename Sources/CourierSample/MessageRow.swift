import CourierKit
import Foundation

/// One line of the message list, from a message's status (`CourierModel`): what was sent, when,
/// and where it stands, in words.
public struct MessageRow: Sendable, Equatable, Identifiable {
    public let id: MessageID
    /// The `text` of a `{"text": …}` body, or the body itself.
    public var text: String
    public var sentAt: Date?
    /// Sent before this run started, and resumed by it.
    public var resumed: Bool
    public var status: MessageStatus

    /// The row of `status`; `launchedAt` tells a message of this run from a resumed one.
    public init(_ status: MessageStatus, launchedAt: Date) {
        id = status.id
        text = Self.text(of: status.body)
        sentAt = status.sentAt
        resumed = status.sentAt.map { $0 < launchedAt } ?? false
        self.status = status
    }

    /// Where it stands, in words (`MessageStatus.summary(at:)`).
    public func status(now: Date) -> String { status.summary(at: now) }

    /// Whether `status(now:)` changes with time (a countdown to the next attempt): only such
    /// rows need redrawing while nothing happens.
    public var isCountingDown: Bool {
        if case .waiting = status.state { return true }
        return false
    }

    /// The `text` of a `{"text": …}` body, or the body itself.
    static func text(of body: Data?) -> String {
        guard let body else { return "" }
        if let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let text = object["text"] as? String
        {
            return text
        }
        return String(decoding: body, as: UTF8.self)
    }

    /// The server's state line, from the model's destinations: down, or back; nil if none was
    /// ever reported down.
    public static func serverStatus(_ destinations: [DestinationStatus]) -> String? {
        if let down = destinations.first(where: \.isDown) {
            return "server down (\(down.consecutiveFailures) failures in a row at \(down.origin)): messages wait, "
                + "one probe at a time"
        }
        return destinations.last.map { "server back (\($0.origin)): waiting messages resumed" }
    }
}

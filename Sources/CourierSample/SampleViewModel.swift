import CourierKit
import Foundation

/// Everything the sample screen shows and does, with no I/O: the text field, the button, the
/// message rows. The terminal view and the SwiftUI view both draw from it and feed it keys
/// and events; the gateway does the sending.
public struct SampleViewModel: Sendable, Equatable {
    public enum Focus: Sendable, Equatable { case field, sendButton }

    /// Keys the views pass in (the terminal view decodes bytes into these).
    public enum Key: Sendable, Equatable {
        case character(Character)
        case backspace, tab, enter, interrupt
    }

    /// What the view must do after a key.
    public enum Command: Sendable, Equatable {
        case none
        case send(String)
        case quit
    }

    public private(set) var text = ""
    public private(set) var focus = Focus.field
    /// Newest first.
    public private(set) var rows: [MessageRow] = []
    /// The last problem to show (a send that was refused), if any.
    public private(set) var notice: String?
    /// The server's state when Courier backs off from it ("server down …", then "server back
    /// …"), from `destinationDown` / `destinationRecovered` events; nil until the first.
    public private(set) var serverStatus: String?

    /// The first user's server (it answers 200 or 500 at random): where the iOS sample sends
    /// unless the user types another.
    public static let challengeServer = URL(string: "https://challenge.ronash.co/reliable-messaging")!

    /// Where new messages go. Messages already sent keep the URL they were sent to.
    public private(set) var server: URL
    /// The server field as typed, applied by `applyServerText()`.
    public private(set) var serverText: String

    /// Starts with the messages an earlier run left pending: they resume.
    public init(pending: [PendingMessage] = [], server: URL = Self.challengeServer) {
        self.server = server
        serverText = server.absoluteString
        rows = pending.reversed().map { message in
            MessageRow(
                id: message.id, text: Self.text(of: message.body), sentAt: message.sentAt, resumed: true,
                state: message.attempts == 0
                    ? .queued
                    : .failed(
                        attempt: message.attempts, reason: "before restart",
                        nextAttemptAt: message.nextAttemptAt))
        }
    }

    /// The button works only when there is something to send.
    public var isSendEnabled: Bool { !text.trimmingCharacters(in: .whitespaces).isEmpty }

    public var pendingCount: Int {
        rows.filter {
            switch $0.state {
            case .delivered, .abandoned: return false
            default: return true
            }
        }.count
    }

    public mutating func handle(_ key: Key) -> Command {
        switch (key, focus) {
        case (.interrupt, _): return .quit
        case (.tab, .field): focus = .sendButton
        case (.tab, .sendButton): focus = .field
        case (.enter, _), (.character(" "), .sendButton): return submit()
        case (.character("q"), .sendButton): return .quit
        case (.character(let c), .field): text.append(c)
        case (.backspace, .field): if !text.isEmpty { text.removeLast() }
        case (.character, .sendButton), (.backspace, .sendButton): break
        }
        return .none
    }

    /// The view sets the field's text directly (SwiftUI's `TextField` binding).
    public mutating func setText(_ newValue: String) { text = newValue }

    /// The server field, edited (SwiftUI's `TextField` binding).
    public mutating func setServerText(_ newValue: String) { serverText = newValue }

    /// New messages go to the server field's URL from now on, if it is one; otherwise the
    /// server stays as it was and `notice` says why. Returns whether it changed.
    @discardableResult
    public mutating func applyServerText() -> Bool {
        guard let url = Self.serverURL(from: serverText) else {
            notice = "not a server URL (http:// or https:// and a host): \(serverText)"
            return false
        }
        notice = nil
        serverText = url.absoluteString
        guard url != server else { return false }
        server = url
        return true
    }

    /// An absolute http or https URL with a host, from text a person typed (spaces trimmed).
    public static func serverURL(from text: String) -> URL? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let url = URL(string: trimmed), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { return nil }
        return url
    }

    /// The button, or Enter: hand the text to the gateway and clear the field.
    public mutating func submit() -> Command {
        guard isSendEnabled else { return .none }
        let message = text
        text = ""
        notice = nil
        return .send(message)
    }

    /// The gateway accepted the message.
    public mutating func didSend(_ id: MessageID, text: String, at date: Date) {
        guard !rows.contains(where: { $0.id == id }) else { return }
        rows.insert(MessageRow(id: id, text: text, sentAt: date, resumed: false, state: .queued), at: 0)
    }

    /// The gateway refused the message (bad input, disk full, …).
    public mutating func sendFailed(_ message: String) { notice = message }

    /// A library event: move the message's row along.
    public mutating func apply(_ event: CourierEvent, at now: Date) {
        switch event {
        case .enqueued, .storageFailed, .missedEvents: return
        case .attemptStarted(let id, let number): update(id) { $0.state = .sending(attempt: number) }
        case .handedOff(let id, let attempt): update(id) { $0.state = .handedOff(attempt: attempt) }
        case .failed(let id, let attempt, let outcome, let nextAttemptAt):
            update(id) {
                $0.state = .failed(
                    attempt: attempt, reason: MessageRow.reason(outcome), nextAttemptAt: nextAttemptAt ?? now)
            }
        case .delivered(let id, let attempts):
            update(id) { $0.state = .delivered(attempts: attempts, after: now.timeIntervalSince($0.sentAt)) }
        case .abandoned(let id, _, let reason): update(id) { $0.state = .abandoned(reason: reason) }
        case .cancelled(let id): update(id) { $0.state = .abandoned(reason: "cancelled") }
        case .destinationDown(let origin, let failures):
            serverStatus =
                "server down (\(failures) failures in a row at \(origin)): messages wait, one probe at a time"
        case .destinationRecovered(let origin, let downFor, let released):
            let seconds = Double(downFor.components.seconds) + Double(downFor.components.attoseconds) / 1e18
            serverStatus =
                "server back (\(origin), down \(String(format: "%.1f", seconds)) s): \(released) waiting messages "
                + "resumed"
        }
    }

    private mutating func update(_ id: MessageID, _ change: (inout MessageRow) -> Void) {
        guard let i = rows.firstIndex(where: { $0.id == id }) else { return }
        change(&rows[i])
    }

    /// The `text` of a `{"text": …}` body, or the body itself.
    static func text(of body: Data) -> String {
        if let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let text = object["text"] as? String
        {
            return text
        }
        return String(decoding: body, as: UTF8.self)
    }
}

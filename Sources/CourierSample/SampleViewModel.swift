import CourierKit
import Foundation

/// The sample screen's input, with no I/O: the text field, the button, the server, the last
/// notice. The messages come from `CourierModel` (shown as `MessageRow`s); the terminal view
/// feeds keys in and draws both (`ScreenRenderer`).
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
    /// The last problem to show (a send that was refused), if any.
    public private(set) var notice: String?

    /// Where new messages go. Messages already sent keep the URL they were sent to.
    public private(set) var server: URL
    /// The server field as typed, applied by `applyServerText()`.
    public private(set) var serverText: String

    public init(server: URL) {
        self.server = server
        serverText = server.absoluteString
    }

    /// The button works only when there is something to send.
    public var isSendEnabled: Bool { !text.trimmingCharacters(in: .whitespaces).isEmpty }

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

    /// The server field, edited.
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

    /// The button, or Enter: hand the text over and clear the field.
    public mutating func submit() -> Command {
        guard isSendEnabled else { return .none }
        let message = text
        text = ""
        notice = nil
        return .send(message)
    }

    /// `send` refused the message (bad input, disk full, …).
    public mutating func sendFailed(_ message: String) { notice = message }
}

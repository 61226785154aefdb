import Foundation

/// Draws the sample screen as lines of text for a terminal of a given size. Pure, so tests can
/// check what a person would see; `styled` adds ANSI reverse video on the focused element.
public struct ScreenRenderer {
    public var width: Int
    public var height: Int
    public var styled: Bool
    /// Shown in the status line.
    public var logDirectory: String
    public var serverDescription: String

    public init(width: Int, height: Int, styled: Bool, logDirectory: String, serverDescription: String) {
        self.width = max(20, width)
        self.height = max(8, height)
        self.styled = styled
        self.logDirectory = logDirectory
        self.serverDescription = serverDescription
    }

    /// The screen: `model`'s field and button, then `rows` (newest first), a status line with
    /// `serverStatus` (or the last notice), and `pendingCount`.
    public func lines(
        for model: SampleViewModel, rows: [MessageRow], serverStatus: String?, pendingCount: Int, now: Date
    ) -> [String] {
        var out: [String] = []
        out.append(fit(" Courier — type a message, Tab to [ Send ], Enter. Messages are never lost."))
        let buttonText = "[ Send ]"
        let fieldWidth = max(8, width - buttonText.count - 6)
        let visible = String(model.text.suffix(fieldWidth - 1))
        let cursor = model.focus == .field ? "_" : " "
        let field = (visible + cursor).padding(toLength: fieldWidth, withPad: " ", startingAt: 0)
        let fieldPart = model.focus == .field ? highlight(field) : field
        var button = model.focus == .sendButton ? highlight(buttonText) : buttonText
        if !model.isSendEnabled { button = dim(button) }
        out.append(" " + "┌" + String(repeating: "─", count: fieldWidth) + "┐")
        out.append(" " + "│" + fieldPart + "│ " + button)
        out.append(" " + "└" + String(repeating: "─", count: fieldWidth) + "┘")
        // One status line: a refused send first, else the server's state (down / back).
        out.append(fit(model.notice.map { " ! " + $0 } ?? serverStatus.map { " ⇅ " + $0 } ?? ""))
        out.append(fit(" Messages (newest first)"))
        let listHeight = height - out.count - 2
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        for row in rows.prefix(max(0, listHeight)) {
            let text = String(row.text.prefix(24)).padding(toLength: 24, withPad: " ", startingAt: 0)
            let mark = row.resumed ? "↻" : " "
            let time = row.sentAt.map(formatter.string(from:)) ?? "        "
            out.append(fit("  \(time) \(mark) \(text)  \(row.status(now: now))"))
        }
        if rows.count > listHeight && listHeight > 0 {
            out[out.count - 1] = fit("  … \(rows.count - listHeight + 1) more")
        }
        while out.count < height - 2 { out.append("") }
        out.append(fit(" log: \(logDirectory) · \(pendingCount) pending · server: \(serverDescription)"))
        out.append(fit(" Tab: move · Enter/Space on [ Send ]: send · q on [ Send ] or Ctrl-C: quit"))
        return out
    }

    /// Truncates to the width (counting characters; the sample's own text is plain).
    func fit(_ s: String) -> String { s.count <= width ? s : String(s.prefix(width - 1)) + "…" }
    func highlight(_ s: String) -> String { styled ? "\u{1B}[7m" + s + "\u{1B}[0m" : s }
    func dim(_ s: String) -> String { styled ? "\u{1B}[2m" + s + "\u{1B}[0m" : s }
}

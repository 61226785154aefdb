import CourierKit
import SwiftUI

/// The sample's one screen: a server field, a message field, Send, and every message with its
/// state, from a `CourierModel` (which follows the courier: nothing here reduces events).
@MainActor
struct SampleScreen: View {
    let model: CourierModel
    @State private var text = ""
    @State private var serverText: String
    @State private var server: URL
    @State private var notice: String?
    /// Called with a server the user applied (the app remembers it).
    let onServerChange: (URL) -> Void

    init(model: CourierModel, server: URL, onServerChange: @escaping (URL) -> Void) {
        self.model = model
        _server = State(initialValue: server)
        _serverText = State(initialValue: server.absoluteString)
        self.onServerChange = onServerChange
    }

    var body: some View {
        VStack(alignment: .leading) {
            HStack {
                Text("Server").font(.footnote).foregroundStyle(.secondary)
                TextField("https://…", text: $serverText)
                    .font(.footnote).autocorrectionDisabled()
                    .keyboardType(.URL).textInputAutocapitalization(.never)
                    .onSubmit(applyServer)
            }
            HStack {
                TextField("Message", text: $text).textFieldStyle(.roundedBorder).onSubmit(send)
                Button("Send", action: send).disabled(text.trimmingCharacters(in: .whitespaces).isEmpty)
            }
            if let notice { Text(notice).foregroundStyle(.red).font(.footnote) }
            if let down = model.destinations.first(where: \.isDown) {
                Text("\(down.origin) is down: messages wait, one probe at a time")
                    .foregroundStyle(.orange).font(.footnote)
            }
            Text("\(model.pendingCount) pending").font(.footnote).foregroundStyle(.secondary)
            List(model.messages.reversed()) { message in
                VStack(alignment: .leading) {
                    Text(Self.text(of: message.body))
                    StatusLabel(message: message)
                }
            }
        }
        .padding()
    }

    private func send() {
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { return }
        do {
            try model.send(["text": text], to: server)
            text = ""
            notice = nil
        } catch {
            notice = error.localizedDescription  // too large, disk full, …: nothing was stored
        }
    }

    private func applyServer() {
        guard let url = URL(string: serverText.trimmingCharacters(in: .whitespaces)),
            let scheme = url.scheme, ["http", "https"].contains(scheme.lowercased()), url.host != nil
        else {
            notice = "not a server URL (http:// or https:// and a host): \(serverText)"
            return
        }
        notice = nil
        server = url
        onServerChange(url)
    }

    /// The `text` of a `{"text": …}` body.
    static func text(of body: Data?) -> String {
        guard let body, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return "" }
        return object["text"] as? String ?? ""
    }
}

/// A message's state in words; a countdown to the next attempt redraws on its own.
struct StatusLabel: View {
    let message: MessageStatus

    var body: some View {
        if case .waiting = message.state {
            TimelineView(.periodic(from: .now, by: 0.25)) { context in label(now: context.date) }
        } else {
            label(now: .now)
        }
    }

    private func label(now: Date) -> some View {
        Text(Self.words(message, now: now)).font(.caption).foregroundStyle(.secondary)
    }

    static func words(_ message: MessageStatus, now: Date) -> String {
        switch message.state {
        case .queued: "queued"
        case .sending(let attempt): "sending (attempt \(attempt))"
        case .handedOff(let attempt): "handed to iOS (attempt \(attempt))"
        case .waiting(let next, let failure):
            "attempt \(message.attempts) failed\(failure.map { " (\($0))" } ?? "") — next in "
                + "\(max(0, Int(next.timeIntervalSince(now).rounded(.up)))) s"
        case .delivered: "delivered after \(message.attempts) attempt\(message.attempts == 1 ? "" : "s")"
        case .abandoned(let reason): "abandoned: \(reason)"
        case .cancelled: "cancelled"
        }
    }
}

import CourierKit
import SwiftUI

/// The Messages tab: the server, a message field and Send, and every message with its state in
/// the model's words. It reads the app delegate's model; it opens, owns and follows nothing.
@MainActor
struct MessagesScreen: View {
    let model: CourierModel
    /// Opens the outbox again after a failure (the app delegate's `openOutbox`).
    let reopen: () async -> Void
    @State private var text = ""
    @State private var serverText = SharedContainer.server.absoluteString
    @State private var notice: String?

    var body: some View {
        List {
            Section {
                TextField("Server", text: $serverText)
                    .keyboardType(.URL).textInputAutocapitalization(.never).autocorrectionDisabled()
                    .onSubmit(applyServer)
                HStack {
                    TextField("Message", text: $text).onSubmit(send)
                    Button("Send", action: send).disabled(text.trimmingCharacters(in: .whitespaces).isEmpty)
                }
                if let notice { Text(notice).font(.footnote).foregroundStyle(.red) }
                if let error = model.openError {
                    Text("The outbox did not open: \(error.localizedDescription)").foregroundStyle(.red)
                    Button("Try again") { Task { await reopen() } }
                }
            } footer: {
                Text("Server: the challenge's until you type another and press Return (a server on your Mac: "
                    + "http://<Mac's IP>:18787/messages).")
            }
            // Each part reads only what it shows, so an event redraws only what it changed: a
            // message's state its row, a count the header, a join or leave the list (check 6
            // scrolls 5,000 of them).
            Section {
                MessageRows(model: model)
            } header: {
                PendingCount(model: model)
            }
        }
        .navigationTitle("Courier")
    }

    private func send() {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return }
        do {
            // `sentAt` lets a server's arrival log give send → arrival on its own (check 2).
            try model.send(["text": trimmed, "sentAt": Date().ISO8601Format()], to: SharedContainer.server)
            text = ""
            notice = nil
        } catch {
            notice = error.localizedDescription  // not open yet, too large, disk full: nothing stored
        }
    }

    private func applyServer() {
        let typed = serverText.trimmingCharacters(in: .whitespaces)
        guard let url = URL(string: typed), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host() != nil
        else {
            notice = "not a server URL (http:// or https:// and a host): \(typed)"
            return
        }
        notice = nil
        SharedContainer.server = url
    }
}

/// The messages, newest first: ids, not `messages`, so a state change does not redraw the list.
struct MessageRows: View {
    let model: CourierModel

    var body: some View {
        ForEach(model.ids.reversed(), id: \.self) { MessageRow(model: model, id: $0) }
    }
}

/// The section's header: the pending count, redrawn when it changes.
struct PendingCount: View {
    let model: CourierModel

    var body: some View { Text("\(model.pendingCount) pending") }
}

/// One message: the start of its id (its `Idempotency-Key`, as a server's log shows it), when
/// it was sent, and its state in words; a countdown to the next attempt redraws each second.
/// It reads its own message (`status(of:)`), so another message's change does not redraw it.
struct MessageRow: View {
    let model: CourierModel
    let id: MessageID

    var body: some View {
        if let message = model.status(of: id) {
            if case .waiting = message.state {
                TimelineView(.periodic(from: .now, by: 1)) { context in
                    row(message, message.summary(at: context.date))
                }
            } else {
                row(message, message.description)
            }
        }
    }

    private func row(_ message: MessageStatus, _ state: String) -> some View {
        VStack(alignment: .leading) {
            Text(heading(message)).font(.caption.monospaced()).foregroundStyle(.secondary)
            Text(state)
        }
    }

    private func heading(_ message: MessageStatus) -> String {
        let sent = message.sentAt.map { " · sent " + $0.formatted(date: .omitted, time: .standard) } ?? ""
        return String(message.id.description.prefix(8)) + sent
    }
}

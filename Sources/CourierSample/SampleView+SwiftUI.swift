#if canImport(SwiftUI)
// The same screen for iOS and macOS: a TextField, a Button, a List, driven by the same
// `SampleViewModel` as the terminal view (all logic is there, tested on Linux). Type-checked for
// iOS by `make ios-check`; the iOS sample app (Samples/CourierSample.swiftpm) shows it.
import CourierKit
import SwiftUI

/// Bridges the value-type view model to SwiftUI (iOS 16: `ObservableObject`).
@MainActor
public final class SampleModel: ObservableObject {
    @Published public private(set) var state: SampleViewModel
    private let gateway: any SampleGateway
    private var listener: Task<Void, Never>?

    /// Called with the new server after the user applies one (the app stores it).
    public var onServerChange: ((URL) -> Void)?

    /// Lists the pending messages (read off the main thread) and follows every event after
    /// them: no update is missed between the list and the stream.
    public init(gateway: any SampleGateway, server: URL = SampleViewModel.challengeServer) async {
        self.gateway = gateway
        let (pending, events) = await gateway.pendingMessagesAndEvents()
        self.state = SampleViewModel(pending: pending, server: server)
        listener = Task { [weak self] in
            for await event in events { self?.state.apply(event, at: Date()) }
        }
    }

    deinit { listener?.cancel() }

    public var text: String {
        get { state.text }
        set { state.setText(newValue) }
    }

    public var serverText: String {
        get { state.serverText }
        set { state.setServerText(newValue) }
    }

    public func applyServer() {
        if state.applyServerText() { onServerChange?(state.server) }
    }

    public func send() {
        guard case .send(let text) = state.submit() else { return }
        do {
            let id = try gateway.send(text: text, to: state.server)
            state.didSend(id, text: text, at: Date())
        } catch {
            state.sendFailed("\(error)")
        }
    }
}

public struct CourierSampleView: View {
    @ObservedObject var model: SampleModel

    public init(model: SampleModel) { self.model = model }

    public var body: some View {
        VStack(alignment: .leading) {
            HStack {
                Text("Server").font(.footnote).foregroundStyle(.secondary)
                TextField("https://…", text: $model.serverText)
                    .font(.footnote)
                    .autocorrectionDisabled()
                    #if os(iOS)
                .keyboardType(.URL)
                .textInputAutocapitalization(.never)
                    #endif
                    .onSubmit { model.applyServer() }
            }
            HStack {
                TextField("Message", text: $model.text)
                    .textFieldStyle(.roundedBorder)
                    .onSubmit { model.send() }
                Button("Send") { model.send() }
                    .disabled(!model.state.isSendEnabled)
            }
            if let notice = model.state.notice {
                Text(notice).foregroundStyle(.red).font(.footnote)
            }
            if let serverStatus = model.state.serverStatus {
                Text(serverStatus).foregroundStyle(.orange).font(.footnote)
            }
            List(model.state.rows) { row in
                VStack(alignment: .leading) {
                    Text((row.resumed ? "↻ " : "") + row.text)
                    RowStatus(row: row)
                }
            }
        }
        .padding()
    }
}

/// A row's state; only a countdown to the next attempt redraws on its own (4 times a second).
struct RowStatus: View {
    let row: MessageRow

    var body: some View {
        if row.isCountingDown {
            TimelineView(.periodic(from: .now, by: 0.25)) { context in label(now: context.date) }
        } else {
            label(now: Date())
        }
    }

    private func label(now: Date) -> some View {
        Text(row.status(now: now)).font(.caption).foregroundStyle(.secondary)
    }
}
#endif

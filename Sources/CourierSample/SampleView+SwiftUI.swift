#if canImport(SwiftUI)
// The same screen for iOS and macOS: a TextField, a Button, a List, driven by the same
// `SampleViewModel` as the terminal view (all logic is there, tested on Linux). Type-checked for
// iOS by `make ios-check`; the iOS sample app (Samples/CourierSample.swiftpm) shows it.
import Courier
import SwiftUI

/// Bridges the value-type view model to SwiftUI (iOS 16: `ObservableObject`).
@MainActor
public final class SampleModel: ObservableObject {
    @Published public private(set) var state: SampleViewModel
    private let gateway: any SampleGateway
    private var listener: Task<Void, Never>?

    /// Called with the new server after the user applies one (the app stores it).
    public var onServerChange: ((URL) -> Void)?

    public init(gateway: any SampleGateway, server: URL = SampleViewModel.challengeServer) {
        self.gateway = gateway
        self.state = SampleViewModel(pending: gateway.pendingMessages, server: server)
        let events = gateway.events
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
            TimelineView(.periodic(from: .now, by: 0.25)) { context in
                List(model.state.rows) { row in
                    VStack(alignment: .leading) {
                        Text((row.resumed ? "↻ " : "") + row.text)
                        Text(row.status(now: context.date)).font(.caption).foregroundStyle(.secondary)
                    }
                }
            }
        }
        .padding()
    }
}
#endif

#if canImport(SwiftUI)
// The same screen for iOS and macOS: a TextField, a Button, a List, driven by the same
// `SampleViewModel` as the terminal view. NOT COMPILED on the Linux machine this project is
// built on (SwiftUI exists only on Apple platforms); see README, "The sample on iOS".
import Courier
import SwiftUI

/// Bridges the value-type view model to SwiftUI (iOS 16: `ObservableObject`).
@MainActor
public final class SampleModel: ObservableObject {
    @Published public private(set) var state: SampleViewModel
    private let gateway: any SampleGateway
    private var listener: Task<Void, Never>?

    public init(gateway: any SampleGateway) {
        self.gateway = gateway
        self.state = SampleViewModel(pending: gateway.pendingMessages)
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

    public func send() {
        guard case .send(let text) = state.submit() else { return }
        do {
            let id = try gateway.send(text: text)
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

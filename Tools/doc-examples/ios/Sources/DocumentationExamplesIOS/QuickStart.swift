import CourierKit
import SwiftUI

// README's quick start, compiled for iOS by `make ios-check` (iOS 17: `CourierModel`).

// snippet: ios-quick-start
@available(iOS 17, *)
@MainActor
struct OutboxView: View {
    @State private var model: CourierModel?  // the courier inside lives as long as this view
    @State private var problem: String?
    let server = URL(string: "https://example.com/messages")!

    var body: some View {
        List(model?.messages ?? []) { message in
            Text("\(message.state)")  // queued, sending, waiting until…, delivered
        }
        .toolbar { Button("Send") { try? model?.send(["text": "hi"], to: server) } }
        .overlay { if let problem { Text(problem) } }  // why the outbox did not open
        .task {
            guard model == nil else { return }  // `.task` runs again when the view reappears
            do {
                let outbox = URL.applicationSupportDirectory.appending(path: "outbox")
                model = CourierModel(courier: try await Courier.open(directory: outbox))
            } catch {
                problem = error.localizedDescription
            }
        }
    }
}
// snippet end

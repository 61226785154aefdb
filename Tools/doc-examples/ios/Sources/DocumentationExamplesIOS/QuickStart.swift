import CourierKit
import SwiftUI

// README's quick start, compiled for iOS by `make ios-check` (iOS 17: `CourierModel`). Pasted
// as one file into a new iOS app (in place of its App and ContentView), it runs.

// snippet: ios-quick-start
@main @MainActor  // (on iOS 18+ an App is main-actor isolated anyway)
struct ChatApp: App {
    @State private var outbox = CourierModel()  // one for the app: made once, shared by its views

    var body: some Scene {
        WindowGroup {
            OutboxView(model: outbox)
                .task { await outbox.open(directory: .applicationSupportDirectory.appending(path: "outbox")) }
        }
    }
}

struct OutboxView: View {
    let model: CourierModel
    // The first user's server: it answers 200 or 500 at random, and Courier retries the 500s.
    let server = URL(string: "https://challenge.ronash.co/reliable-messaging")!

    var body: some View {
        NavigationStack {
            List(model.messages) { message in
                Text(message.description)  // "queued", "attempt 1 failed (500) — next in 0.9 s", …
            }
            .navigationTitle("Outbox")
            .toolbar { Button("Send") { try? model.send(["text": "hi"], to: server) } }
            .overlay { if let error = model.openError { Text("No outbox: \(error.localizedDescription)") } }
        }
    }
}
// snippet end

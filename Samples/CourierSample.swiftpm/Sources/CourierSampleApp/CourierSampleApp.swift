import CourierKit
import SwiftUI
import UIKit

/// The iOS sample: one screen (a server field, a message field, Send, and every message with
/// its state), on a Courier opened at launch with the app-lifecycle integration turned on. Quit
/// it with messages pending (against a server that fails, say) and launch it again: they are
/// listed again, attempt counts carried over, and delivered.
@main @MainActor
struct CourierSampleApp: App {
    @UIApplicationDelegateAdaptor(AppDelegate.self) private var appDelegate

    var body: some Scene {
        WindowGroup {
            OutboxScreen(outbox: appDelegate.outbox)
        }
    }
}

/// Registers background delivery and starts opening the outbox while the app launches: iOS
/// requires every `BGTaskScheduler` handler to be registered before launch ends, and a launch
/// in the background (to run that task) may never show a screen, so the courier cannot wait
/// for one. The identifier is the one AdditionalInfo.plist permits.
@MainActor
final class AppDelegate: NSObject, UIApplicationDelegate {
    static let backgroundDeliveryIdentifier = "com.example.courier-sample.delivery"
    /// The background URLSession that delivers while the app is suspended (AppOutbox turns it on).
    static let backgroundUploadsIdentifier = "com.example.courier-sample.uploads"
    let outbox = AppOutbox()

    func application(_ application: UIApplication,
                     didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil) -> Bool {
        Courier.registerBackgroundDelivery(identifier: Self.backgroundDeliveryIdentifier)
        Task { await outbox.open() }
        return true
    }

    /// iOS relaunched or woke the app to report background uploads: Courier logs each one, hands
    /// off what is left, then calls `completionHandler` on the main thread. Only Courier's
    /// session is Courier's: an app with background sessions of its own handles the others.
    func application(_ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
                     completionHandler: @escaping () -> Void) {
        if URLSessionBackgroundUploads.handleEvents(forSession: identifier, completionHandler: completionHandler) { return }
        completionHandler()  // no session of this app's own has that identifier
    }
}

/// The screen while the outbox opens, once it is open, or if it could not open.
struct OutboxScreen: View {
    @ObservedObject var outbox: AppOutbox

    var body: some View {
        switch outbox.phase {
        case .opening:
            ProgressView("Opening the outbox…")
        case .open(let model):
            NavigationStack {
                SampleScreen(model: model, server: outbox.server, onServerChange: outbox.remember)
                    .navigationTitle("Courier")
            }
        case .failed(let message):
            VStack(spacing: 12) {
                Text("The outbox did not open: \(message)")
                Button("Try again") { Task { await outbox.open() } }
            }
            .padding()
        }
    }
}

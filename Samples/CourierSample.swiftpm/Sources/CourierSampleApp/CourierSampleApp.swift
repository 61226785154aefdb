import Courier
import CourierSample
import SwiftUI
import UIKit

/// The iOS sample: one screen (a server field, a message field, Send, and every message with
/// its state), on a Courier opened with the app-lifecycle integration turned on. Quit it with
/// messages pending (against a server that fails, say) and launch it again: they are listed,
/// marked ↻, and delivered.
@main @MainActor
struct CourierSampleApp: App {
    @UIApplicationDelegateAdaptor(AppDelegate.self) private var appDelegate
    @StateObject private var outbox = AppOutbox()

    var body: some Scene {
        WindowGroup {
            Group {
                switch outbox.phase {
                case .opening:
                    ProgressView("Opening the outbox…")
                case .open(let model):
                    NavigationStack {
                        CourierSampleView(model: model).navigationTitle("Courier")
                    }
                case .failed(let message):
                    Text("The outbox did not open: \(message)").padding()
                }
            }
            .task { await outbox.open() }
        }
    }
}

/// Registers background delivery before launch finishes, as `BGTaskScheduler` requires; the
/// identifier is the one AdditionalInfo.plist permits.
final class AppDelegate: NSObject, UIApplicationDelegate {
    static let backgroundDeliveryIdentifier = "com.example.courier-sample.delivery"

    func application(_ application: UIApplication,
                     didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil) -> Bool {
        Courier.registerBackgroundDelivery(identifier: Self.backgroundDeliveryIdentifier)
        return true
    }
}

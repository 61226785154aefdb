import CourierKit
import SwiftUI
import UIKit

// The iOS set-up of README.md ("Use", "Background delivery") and RunningOnIOS.md, compiled
// for iOS by `make ios-check`: see Tests/CourierTests/DocumentationExamples.swift for how the
// regions between `// snippet: NAME` and `// snippet end` reach the documents.

// snippet: ios-app-delegate
@MainActor
final class AppDelegate: NSObject, UIApplicationDelegate {
    static let uploads = "com.example.app.courier.uploads"  // Courier's background URLSession
    static let delivery = "com.example.app.courier.delivery"  // in BGTaskSchedulerPermittedIdentifiers

    /// The app's one outbox, for its whole life (a released courier stops delivering): views
    /// read it as `appDelegate.outbox`.
    let outbox = CourierModel()
    /// Made with the delegate, so Courier's session is known when iOS reports its events.
    let configuration: Courier.Configuration = {
        var configuration = Courier.Configuration()
        configuration.backgroundUploads = .urlSession(identifier: AppDelegate.uploads)
        return configuration
    }()

    func application(
        _ application: UIApplication,
        didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]? = nil
    ) -> Bool {
        Courier.registerBackgroundDelivery(identifier: Self.delivery)  // before launch ends
        // Replays off the main thread; waits for the first unlock if iOS launched the app before
        // it; a failure is kept in `outbox.openError` (call `open` again to retry).
        let directory = URL.applicationSupportDirectory.appending(path: "outbox")
        Task { await outbox.open(directory: directory, configuration: configuration, lifecycle: .automatic) }
        return true
    }

    func application(
        _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
        completionHandler: @escaping () -> Void
    ) {
        if URLSessionBackgroundUploads.handleEvents(forSession: identifier, completionHandler: completionHandler) {
            return
        }
        completionHandler()  // or pass it to a background session of your own with that identifier
    }
}
// snippet end

// snippet: ios-swiftui
@MainActor
struct BackgroundChatApp: App {  // @main in place of the quick start's ChatApp
    @UIApplicationDelegateAdaptor(AppDelegate.self) private var appDelegate

    var body: some Scene {
        WindowGroup { OutboxView(model: appDelegate.outbox) }
            // Instead of the delegate's handleEventsForBackgroundURLSession, if you prefer:
            .backgroundTask(.urlSession(AppDelegate.uploads)) {
                await URLSessionBackgroundUploads.handleEvents(forSession: AppDelegate.uploads)
            }
    }
}
// snippet end

/// README's "Use", on iOS.
func use(courier: Courier, serverURL: URL) async throws {
    // snippet: ios-use
    let id = try courier.send(["text": "hi"], to: serverURL)  // on disk when this returns; callable on main
    try await courier.delivered(id)  // after a 2xx; throws .abandoned if the policy gives up
    // snippet end
}

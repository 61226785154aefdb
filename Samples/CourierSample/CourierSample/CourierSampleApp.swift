import CourierKit
import SwiftUI
import UIKit

/// The device kit's app: a Messages tab (send, and every message's state) and a Debug tab
/// (counts, protection classes, the exit timer, the processing task, MetricKit), both over the
/// app delegate's one `CourierModel`. DEVICE-TESTS.md says what to do with them.
@main @MainActor
struct CourierSampleApp: App {
    @UIApplicationDelegateAdaptor(AppDelegate.self) private var delegate
    /// The app's scenes together: `.background` once none is on screen.
    @Environment(\.scenePhase) private var scenePhase

    var body: some Scene {
        WindowGroup {
            TabView {
                NavigationStack { MessagesScreen(model: delegate.model, reopen: delegate.openOutbox) }
                    .tabItem { Label("Messages", systemImage: "tray.full") }
                NavigationStack { DebugScreen(delegate: delegate) }
                    .tabItem { Label("Debug", systemImage: "ladybug") }
            }
            #if DEBUG
            .onChange(of: scenePhase) { _, phase in delegate.exitTimer.sceneDidChange(to: phase) }
            #endif
        }
    }
}

/// Owns the app's one model and opens it while the app launches: iOS requires every
/// `BGTaskScheduler` handler to be registered before launch ends, and a launch in the background
/// (for the processing task, or to report uploads) shows no screen, so nothing may wait for one.
@MainActor
final class AppDelegate: NSObject, UIApplicationDelegate {
    /// The processing task's identifier, as Info.plist's BGTaskSchedulerPermittedIdentifiers.
    static let delivery = "com.example.courier-sample.delivery"
    /// Courier's background URLSession.
    static let uploads = "com.example.courier-sample.uploads"
    /// The courier's log, in the app's own container, never the App Group's (0xdead10cc).
    static let outboxDirectory = URL.applicationSupportDirectory.appending(path: "courier-outbox")
    /// The delegate of this launch: tests hosted by the app reach its model through it (with
    /// the SwiftUI life cycle, `UIApplication.shared.delegate` is SwiftUI's, not this).
    private(set) static var current: AppDelegate?

    /// The app's messages, for every screen; open once `openOutbox()` succeeded.
    let model = CourierModel()
    /// Made with the delegate, so Courier's session is known when iOS reports its events.
    let configuration: Courier.Configuration = {
        var configuration = Courier.Configuration()
        configuration.backgroundUploads = .urlSession(identifier: AppDelegate.uploads)
        // What the share extension wrote: collected at open, on return to the foreground, and
        // at once when the extension's send wakes a running app.
        configuration.extensionOutboxDirectory = SharedContainer.extensionOutbox
        // Courier's own lines (ids, attempts, statuses; never a body) in Console, each attempt
        // and background upload too (debug level): DEVICE-TESTS.md reads them.
        configuration.logger = .osLog(subsystem: "com.example.courier-sample", logLevel: .debug, privacy: .public)
        return configuration
    }()
    let backgroundExits = BackgroundExits()
    #if DEBUG
    let exitTimer = ExitTimer()
    #endif

    func application(
        _ application: UIApplication,
        didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil
    ) -> Bool {
        Self.current = self
        Courier.registerBackgroundDelivery(identifier: Self.delivery)
        backgroundExits.start()
        Task { await openOutbox() }
        return true
    }

    /// Opens the outbox off the main thread (at once if it is open already); launched in the
    /// background before the first unlock, it waits for the unlock. A failure stays in
    /// `model.openError`, and the Messages tab offers to try again.
    func openOutbox() async {
        await model.open(directory: Self.outboxDirectory, configuration: configuration, lifecycle: .automatic)
    }

    /// iOS woke or relaunched the app to report background uploads: Courier logs each one,
    /// hands off what is left, then calls `completionHandler` on the main thread.
    func application(
        _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
        completionHandler: @escaping () -> Void
    ) {
        if URLSessionBackgroundUploads.handleEvents(forSession: identifier, completionHandler: completionHandler) {
            return
        }
        completionHandler()  // not Courier's session: the sample has no other
    }
}

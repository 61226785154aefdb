#if os(iOS) && canImport(UIKit) && canImport(BackgroundTasks) && canImport(Network)
import BackgroundTasks
import CourierLog
import Network
import UIKit

// iOS only. Type-checked for iOS by `make ios-check`; never linked or run here (no Apple
// machine): what a type-check cannot see (threads, timing, lifecycles) was checked against
// Apple's documentation of each API. It only wires iOS events to
// platform-neutral calls that are tested on Linux: `retryNow()`, `deliverPending(within:)`
// (through `runBackgroundDelivery(within:)`), `useBackgroundWindow`, `pendingCount`.
//
// All of it is the app's, never an extension's: it calls `UIApplication.shared` and registers
// `BGTaskScheduler` handlers, which iOS keeps from app extensions. Marked so, the package links
// into an extension (which uses the rest: `open`, `send`); `make ios-check` type-checks the
// package as an extension builds it too.

@available(iOSApplicationExtension, unavailable)
extension Courier {
    /// Registers the handler of the `BGProcessingTask` that delivers pending messages while the
    /// app is in the background. Call it once, before the app finishes launching (iOS requires
    /// every launch handler to be registered by then), with an identifier listed under
    /// `BGTaskSchedulerPermittedIdentifiers` in Info.plist. The task works for the courier
    /// opened with `open(directory:configuration:lifecycle:)` (either lifecycle), else for the
    /// first courier this process opened that is still open; if none is open yet (a cold
    /// background launch), it waits for one, until iOS expires the task.
    /// Registering one identifier twice is a crash in iOS: call this exactly once.
    public static func registerBackgroundDelivery(identifier: String) {
        // Nonisolated on purpose: iOS calls the launch handler on a background queue.
        let registered = BGTaskScheduler.shared.register(forTaskWithIdentifier: identifier, using: nil) { task in
            // Taken out by the first to finish, its work or its expiration: completed exactly once.
            let unfinished = Locked(Optional(UncheckedSendable(value: task)))
            @Sendable func complete(success: Bool) { unfinished.take()?.value.setTaskCompleted(success: success) }
            let work = Task {
                // A cold background launch runs this before the app has opened its courier:
                // wait for it (until the task expires) instead of giving up at once.
                guard let courier = await BackgroundDeliveryRegistry.shared.waitForCourier() else {
                    Courier.scheduleBackgroundDelivery()  // keep the chain of requests alive
                    complete(success: false)
                    return
                }
                // Background uploads first, as at `didEnterBackground`: this task delivers only
                // what the session does not have, and ends as soon as nothing else is left
                // (waiting for discretionary uploads would hold it until iOS expired it).
                if await MainActor.run(body: { UIApplication.shared.applicationState == .background }) {
                    await courier.appDidEnterBackground()
                }
                // Ask for the next run first (a suspended app cannot ask later), if there is work
                // that the session does not have.
                if courier.pendingCount > courier.handedOffCount { Courier.scheduleBackgroundDelivery() }
                // A processing task may run for minutes; its expiration cancels the delivery,
                // which then stops cleanly.
                let outcome = await courier.runBackgroundDelivery(within: .seconds(3600))
                complete(success: outcome.success)
            }
            // On expiry: stop waiting or delivering, and complete the task at once, as iOS requires.
            task.expirationHandler = {
                work.cancel()
                complete(success: false)
            }
        }
        // Not registered (e.g. the identifier is missing from Info.plist): never submit for it.
        if registered { BackgroundDeliveryRegistry.shared.identifier = identifier }
    }

    /// Asks iOS for a background processing task (network required) if one was registered.
    static func scheduleBackgroundDelivery() {
        guard let identifier = BackgroundDeliveryRegistry.shared.identifier else { return }
        let request = BGProcessingTaskRequest(identifier: identifier)
        request.requiresNetworkConnectivity = true
        request.requiresExternalPower = false
        // Fails when the identifier is not permitted or too many requests are pending: iOS
        // then simply does not run one; the next launch delivers.
        try? BGTaskScheduler.shared.submit(request)
    }

    /// How a courier follows the app's life (`open(directory:configuration:lifecycle:)`).
    public enum Lifecycle: Sendable, Hashable {
        /// Courier follows it: background delivery when the app leaves the screen (a background
        /// task, the hand-off, a processing request), retries when it comes back or the network
        /// returns, the background session's events; and an open before the first unlock waits
        /// for it.
        case automatic
        /// The app tells the courier itself (`appDidEnterBackground()`, `appDidEnterForeground()`,
        /// `retryNow()`, `deliverPending(within:)`), as after `open(directory:configuration:)`;
        /// a processing task registered with `registerBackgroundDelivery(identifier:)` works for
        /// this courier, even if another is open.
        case manual
    }

    /// Opens the app's courier: the one call an app makes at launch, from
    /// `application(_:didFinishLaunchingWithOptions:)` on (keep the courier it returns for the
    /// app's lifetime: a released courier stops delivering). With `.automatic`, Courier follows
    /// the app's life, and if iOS launched the app in the background before the device was
    /// first unlocked since it restarted (the log cannot be read yet), it waits for
    /// `UIApplication.protectedDataDidBecomeAvailableNotification` and opens then. Throws what
    /// `open(directory:configuration:)` throws, and `.protectedDataUnavailable` if the calling
    /// task is cancelled while it waits.
    @MainActor
    public static func open(
        directory: URL, configuration: Configuration = Configuration(), lifecycle: Lifecycle
    )
        async throws(CourierError) -> Courier
    {
        guard lifecycle == .automatic else {
            let courier = try await open(directory: directory, configuration: configuration)
            BackgroundDeliveryRegistry.shared.courier = courier  // for a registered processing task
            return courier
        }
        let courier = try await open(
            directory: directory, configuration: configuration,
            waitingForProtectedData: { await protectedDataBecameAvailable() })
        BackgroundDeliveryRegistry.shared.courier = courier
        courier.core.handle(.lifecycle(AppLifecycleIntegration(courier: courier)))
        return courier
    }

    /// Returns true once protected data may be available (at once if it is), false if the
    /// calling task is cancelled first. Observes before it reads the flag, so no notification is
    /// lost. Besides `protectedDataDidBecomeAvailable`, the app coming to the foreground wakes it
    /// too: an app launched before the first unlock is usually suspended again before the user
    /// unlocks, and Apple does not say whether the notification still reaches it then (an app on
    /// screen has been unlocked; a wake too early costs one more refused open, of 8 at most).
    @MainActor
    private static func protectedDataBecameAvailable() async -> Bool {
        let signal = OneShotSignal()
        let center = NotificationCenter.default
        let observers = [
            UIApplication.protectedDataDidBecomeAvailableNotification, UIApplication.didBecomeActiveNotification
        ]
        .map { center.addObserver(forName: $0, object: nil, queue: .main) { _ in signal.fire() } }
        defer { for observer in observers { center.removeObserver(observer) } }
        if UIApplication.shared.isProtectedDataAvailable { return true }
        return await signal.wait()
    }
}

/// The observers, path monitor and background task of one courier: its app's life, followed
/// (`Lifecycle.automatic`), so nothing happens behind its back:
/// - entering the background with messages pending: `beginBackgroundTask` around
///   `deliverPending(within: 25 s)`, ended on expiry; and a background processing request
///   (if `registerBackgroundDelivery(identifier:)` was called);
/// - coming to the foreground, and the network coming back (a satisfied path after an
///   unsatisfied one; not a handover between networks): `retryNow()`.
/// Made once per courier, by `open(…, lifecycle: .automatic)` on the main actor (a new courier:
/// none to replace); it lasts until the courier is closed or released.
@available(iOSApplicationExtension, unavailable)
@MainActor
final class AppLifecycleIntegration: PlatformIntegration {
    private weak var courier: Courier?
    // `nonisolated(unsafe)` for `deinit` only, which is nonisolated and reads it last: every other
    // access is on the main actor, and the last release follows them all (found by `make
    // ios-check` once it ran SIL's checks; a type-check passed it).
    nonisolated(unsafe) private var observers: [any NSObjectProtocol] = []
    private let monitor = NWPathMonitor()
    private var backgroundTask = UIBackgroundTaskIdentifier.invalid
    private var delivery: Task<Void, Never>?
    /// The background session's relay, if background uploads are on (its hook is ours).
    private var relay: BackgroundEventRelay?

    /// Starts following the app's life for `courier`.
    init(courier: Courier) {
        self.courier = courier
        let actions: [(Notification.Name, @MainActor @Sendable (AppLifecycleIntegration) -> Void)] = [
            (UIApplication.didEnterBackgroundNotification, { $0.didEnterBackground() }),
            // Also on becoming active: a hand-off that finished after `willEnterForeground` must
            // not leave the courier handing off while the app is on screen.
            (UIApplication.didBecomeActiveNotification, { $0.courier?.appDidEnterForeground() }),
            (
                UIApplication.willEnterForegroundNotification,
                {
                    $0.courier?.appDidEnterForeground()  // nothing without background uploads
                    $0.courier?.retryNow()
                }
            )
        ]
        observers = actions.map { name, action in
            NotificationCenter.default.addObserver(forName: name, object: nil, queue: .main) { [weak self] _ in
                MainActor.assumeIsolated { if let self { action(self) } }
            }
        }
        connectBackgroundUploads()
        // @Sendable: called on the monitor's queue (serial), never on the main actor.
        let recovery = Locked(NetworkRecovery())
        monitor.pathUpdateHandler = { @Sendable [weak courier] path in
            let status: NetworkRecovery.Status
            switch path.status {
            case .satisfied: status = .satisfied
            case .requiresConnection: status = .requiresConnection
            default: status = .unsatisfied  // .unsatisfied, and any status a later SDK adds
            }
            if recovery.withLock({ $0.isRecovery(status) }) { courier?.retryNow() }
        }
        monitor.start(queue: DispatchQueue(label: "courier.path-monitor"))
    }

    /// With background uploads: after each batch of events the system delivered (a wake or a
    /// relaunch in the background), hand off what is pending if the app is in the background.
    /// (Not at enable time: a scene-based app launches in the background state even when the
    /// user opens it.)
    private func connectBackgroundUploads() {
        guard let courier,
            let uploads = courier.configuration.backgroundUploads?.session as? URLSessionBackgroundUploads
        else { return }
        relay = uploads.relay
        uploads.relay.eventsFinished = { [weak courier] in
            if await MainActor.run(body: { UIApplication.shared.applicationState == .background }) {
                await courier?.appDidEnterBackground()
            }
        }
        // Enabled while the app is on screen (after `didBecomeActive` fired): messages an
        // earlier process handed off come back to the engine now.
        if UIApplication.shared.applicationState == .active { courier.appDidEnterForeground() }
    }

    private func didEnterBackground() {
        guard let courier, courier.pendingCount > 0, backgroundTask == .invalid else { return }
        // Ask for a processing task now: once suspended, the app cannot ask.
        Courier.scheduleBackgroundDelivery()
        backgroundTask = UIApplication.shared.beginBackgroundTask(withName: "Courier delivery") { [weak self] in
            // iOS is about to suspend the app: stop (deliverPending returns at once when its
            // task is cancelled) and end the background task now, as iOS requires.
            MainActor.assumeIsolated {
                self?.delivery?.cancel()
                self?.endBackgroundTask()
            }
        }
        guard backgroundTask != .invalid else { return }  // iOS grants no time now
        // This delivery ends only its own background task: if that one expired and the app
        // left the screen again before this task wound down, a newer one is under way.
        let granted = backgroundTask
        delivery = Task { [weak self] in
            // The engine first, the message just typed among them; what is left is handed off
            // before the window ends, unless the app came back meanwhile.
            _ = await courier.useBackgroundWindow(Courier.backgroundBudget) {
                await MainActor.run { UIApplication.shared.applicationState == .background }
            }
            self?.endBackgroundTask(granted)
        }
    }

    /// Ends the background task under way; with `identifier`, only if it is that one.
    private func endBackgroundTask(_ identifier: UIBackgroundTaskIdentifier? = nil) {
        guard backgroundTask != .invalid, identifier.map({ $0 == backgroundTask }) ?? true else { return }
        UIApplication.shared.endBackgroundTask(backgroundTask)
        backgroundTask = .invalid
    }

    deinit {  // a courier released without close()
        monitor.cancel()
        for observer in observers { NotificationCenter.default.removeObserver(observer) }
    }

    /// Called by `close()`.
    func stop() {
        monitor.cancel()
        for observer in observers { NotificationCenter.default.removeObserver(observer) }
        observers.removeAll()
        relay?.eventsFinished = nil
        delivery?.cancel()
        endBackgroundTask()
    }
}

// The models open the app's courier the same way (`FollowingModel.open(with:)`, tested on Linux
// through `open(directory:configuration:)`).
@available(iOS 17.0, *)
extension CourierModel {
    /// Opens the app's courier with `Courier.open(directory:configuration:lifecycle:)` and
    /// follows it; as `open(directory:configuration:)` otherwise (once, errors in `openError`).
    @available(iOSApplicationExtension, unavailable)
    public func open(
        directory: URL, configuration: Courier.Configuration = Courier.Configuration(), lifecycle: Courier.Lifecycle
    ) async {
        await open(with: { () async throws(CourierError) in
            try await Courier.open(directory: directory, configuration: configuration, lifecycle: lifecycle)
        })
    }
}

@available(iOSApplicationExtension, unavailable)
extension CourierObservableObject {
    /// `CourierModel.open(directory:configuration:lifecycle:)`, for iOS 16.
    public func open(
        directory: URL, configuration: Courier.Configuration = Courier.Configuration(), lifecycle: Courier.Lifecycle
    ) async {
        await open(with: { () async throws(CourierError) in
            try await Courier.open(directory: directory, configuration: configuration, lifecycle: lifecycle)
        })
    }
}
#endif

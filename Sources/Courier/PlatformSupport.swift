import Foundation

/// Small platform-neutral pieces the Apple-only integration builds on, compiled and tested on
/// every platform so that the Apple-only files stay thin.

/// A value that is safe to send but whose type is not marked so (e.g. a `BGTask`, which
/// Apple documents as usable from any thread). Only for that case.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
}

/// A platform's app-lifecycle wiring (on iOS: observers, a path monitor, a background task),
/// owned by the courier and stopped by `close()`.
protocol PlatformIntegration: AnyObject, Sendable {
    @MainActor func stop()
}

/// Holds a courier's platform integration, if the app enabled one (`value`, `take()`).
typealias PlatformIntegrationBox = Locked<(any PlatformIntegration)?>

/// True for the first `claim()` only: so a background task is completed exactly once, by
/// whichever of its expiration handler and its work gets there first.
struct OnceFlag: Sendable {
    private let claimed = Locked(false)

    func claim() -> Bool {
        claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}

/// The courier that background delivery works for, and the task identifier it was registered
/// under: set by `registerBackgroundDelivery(identifier:)` and `enableAppLifecycleIntegration()`,
/// read when iOS launches a background task (possibly before any courier is open).
struct BackgroundDeliveryRegistry: Sendable {
    static let shared = BackgroundDeliveryRegistry()
    private let identifierBox = Locked<String?>(nil)
    private let courierBox = Locked(WeakCourier())

    /// Weak: the registry must not keep a closed or released courier alive.
    private struct WeakCourier { weak var courier: Courier? }

    var identifier: String? {
        get { identifierBox.value }
        nonmutating set { identifierBox.value = newValue }
    }

    var courier: Courier? {
        get { courierBox.value.courier }
        nonmutating set { courierBox.value = WeakCourier(courier: newValue) }
    }
}

extension Courier {
    /// The budget for delivery in a background task: iOS grants an app entering the background
    /// about 30 seconds, and the rest must be left for a clean stop.
    static let backgroundBudget: Duration = .seconds(25)

    /// What a background task should do when it runs: deliver within `budget` (ended early by
    /// cancellation when iOS expires the task), then say whether it finished and whether
    /// another background request is needed. Platform-neutral and tested; the Apple-only
    /// code only calls it.
    func runBackgroundDelivery(within budget: Duration) async -> (success: Bool, reschedule: Bool) {
        let summary = await deliverPending(within: budget)
        return (summary.remaining == 0, summary.remaining > 0)
    }
}

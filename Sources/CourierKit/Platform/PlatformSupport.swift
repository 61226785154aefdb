import CourierLog
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

/// What `work` returns, or `late` if `deadline` returns first: whichever ends first answers,
/// once, and the deadline is then cancelled (no sleeper left behind). With `cancellingWork` the
/// work is cancelled too; either way it is left to end, for it may ignore cancellation (an auth
/// library's callback), and the answer does not wait for it.
func firstOf<T: Sendable>(
    _ work: @escaping @Sendable () async -> T, orAfter deadline: @escaping @Sendable () async -> Void, late: T,
    cancellingWork: Bool = false
) async -> T {
    // Stored before either task is made: the first reply takes it, a later one finds nil.
    let answer = Locked<CheckedContinuation<T, Never>?>(nil)
    @Sendable func reply(_ value: T) { answer.take()?.resume(returning: value) }
    var tasks: [Task<Void, Never>] = []
    let value = await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        answer.withLock { $0 = continuation }
        tasks = [
            Task {
                await deadline()
                reply(late)
            },
            Task { reply(await work()) }
        ]
    }
    for task in tasks.dropLast(cancellingWork ? 0 : 1) { task.cancel() }
    return value
}

/// Tells a network that came back from the stream of path updates (`NWPathMonitor` on iOS):
/// only a satisfied path after an unsatisfied one is a recovery, worth making every waiting
/// message due (`retryNow()`). The monitor reports the current path when it starts, and again
/// at every change of interface (Wi-Fi to cellular) or flag (expensive, constrained) while
/// the path stays satisfied: acting on those would defeat backoff against a failing server.
/// A path that requires a connection (a VPN on demand, a cellular interface to activate)
/// changes nothing: a request of Courier's own may bring it up, and each flap would count.
struct NetworkRecovery: Sendable {
    /// `NWPath.Status`, as the neutral code sees it.
    enum Status: Sendable { case satisfied, unsatisfied, requiresConnection }

    private var wasSatisfied: Bool?

    /// Takes the next update; true if it is a recovery.
    mutating func isRecovery(_ status: Status) -> Bool {
        guard status != .requiresConnection else { return false }  // changes nothing
        defer { wasSatisfied = status == .satisfied }
        return status == .satisfied && wasSatisfied == false
    }
}

/// Lock-protected state that tasks wait on (`Locked.waitUntilReady(cancelled:registered:)`):
/// `OneShotSignal`'s, `BackgroundDeliveryRegistry`'s. Its waiters, by each waiting call's own
/// key (`WaitKey`, alive while it waits), are each resumed exactly once: all together by the
/// change that makes it ready (`Locked.update(resuming:_:)`), or one by its cancellation.
protocol WaitedOn: Sendable {
    associatedtype Answer: Sendable
    /// What a waiter is answered at once; nil while it must wait.
    var ready: Answer? { get }
    var waiters: [ObjectIdentifier: CheckedContinuation<Answer, Never>] { get set }
}

extension Locked where Value: WaitedOn {
    /// `ready` at once unless it is nil, else what the waiters are later resumed with;
    /// `cancelled` if the calling task is cancelled first. `registered` is called once the task
    /// is a waiter.
    func waitUntilReady(cancelled: Value.Answer, registered: (@Sendable () -> Void)? = nil) async -> Value.Answer {
        let key = WaitKey()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value.Answer, Never>) in
                let ready = withLock { state -> Value.Answer? in
                    if let ready = state.ready { return ready }
                    if Task.isCancelled { return cancelled }
                    state.waiters[key.id] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) } else { registered?() }
            }
        } onCancel: {
            withLock { $0.waiters.removeValue(forKey: key.id) }?.resume(returning: cancelled)
        }
    }

    /// Runs `change` on the state; if the state is then ready, resumes every waiter with
    /// `answer`, once the lock is let go.
    func update(resuming answer: Value.Answer, _ change: (inout Value) -> Void) {
        let waiters = withLock { state -> [CheckedContinuation<Value.Answer, Never>] in
            change(&state)
            guard state.ready != nil else { return [] }
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: answer) }
    }
}

/// The courier that background delivery works for, and the task identifier it was registered
/// under: set by `registerBackgroundDelivery(identifier:)` and `open(…, lifecycle:)`, offered by
/// every other courier opened (`offer(_:)`), read when iOS launches a background task, possibly
/// before any courier is open: a cold background launch runs the task's handler before the app
/// has opened its courier, so the handler waits for it (`waitForCourier()`).
struct BackgroundDeliveryRegistry: Sendable {
    static let shared = BackgroundDeliveryRegistry()
    private let identifierBox = Locked<String?>(nil)
    private let state = Locked(State())

    private struct State: WaitedOn {
        /// Weak: the registry must not keep a closed or released courier alive.
        weak var courier: Courier?
        /// The courier once one is set; nil while a waiter must wait.
        var ready: Courier?? { if let courier { .some(courier) } else { nil } }
        /// Tasks waiting for a courier.
        var waiters: [ObjectIdentifier: CheckedContinuation<Courier?, Never>] = [:]
    }

    var identifier: String? {
        get { identifierBox.value }
        nonmutating set { identifierBox.withLock { $0 = newValue } }
    }

    /// Setting a courier resumes every task waiting for one.
    var courier: Courier? {
        get { state.withLock { $0.courier } }
        nonmutating set { state.update(resuming: newValue) { $0.courier = newValue } }
    }

    /// Sets `courier` unless an open one is set already: so a processing task registered with
    /// `registerBackgroundDelivery(identifier:)` also finds a courier the app opened without
    /// `lifecycle:` (it waited for one until iOS expired it). `open(…, lifecycle:)` sets its
    /// courier over any offered one.
    func offer(_ courier: Courier) {
        let taken = state.withLock { $0.courier.map { !$0.core.status.isClosed } ?? false }
        if !taken { self.courier = courier }
    }

    /// The courier: at once if one is set, else when one is; nil if the calling task is
    /// cancelled first (how an expiring background task stops waiting). `waiting` is called
    /// once the task is registered as a waiter (tests).
    func waitForCourier(waiting: (@Sendable () -> Void)? = nil) async -> Courier? {
        await state.waitUntilReady(cancelled: nil, registered: waiting)
    }

    /// Tasks waiting now (tests).
    var waitingCount: Int { state.withLock { $0.waiters.count } }
}

extension Courier {
    /// The budget for delivery in a background task: iOS grants an app entering the background
    /// about 30 seconds, and the rest must be left for a clean stop.
    @_spi(CourierTesting) public static let backgroundBudget: Duration = .seconds(25)

    /// Of a window as the app leaves the screen, what is kept for the hand-off at its end.
    @_spi(CourierTesting) public static let handOffReserve: Duration = .seconds(5)

    /// The seconds iOS grants an app leaving the screen (`window`, its background task's), as
    /// the lifecycle integration and `SimulatedApp` use them. The engine delivers first, the
    /// message just typed among them: a request of the app's own goes now, where an upload the
    /// background session takes while the app is in the background is discretionary, and may
    /// wait for Wi-Fi or power. `handOffReserve` before the end, while the app is still in the
    /// background (`stillInBackground`: it may have come back), whatever is pending is handed
    /// off, and the app stays up, at most `firstAnswersWithin`, for the first answers of a
    /// destination that hand-off went to blind. Without background uploads the engine has the
    /// whole window; a paused courier (`pause()`) hands off at once. Returns whether only the
    /// background session's messages are left, and whether a background request is still
    /// needed for the others.
    @_spi(CourierTesting)
    public func useBackgroundWindow(
        _ window: Duration, firstAnswersWithin: Duration = .seconds(10),
        stillInBackground: @Sendable () async -> Bool
    ) async -> (success: Bool, reschedule: Bool) {
        let start = clock.elapsed()
        let handsOff = configuration.backgroundUploads != nil
        let engine = window - (handsOff ? Self.handOffReserve : .zero)
        if engine > .zero, !core.status.isPaused { _ = await deliverPending(within: engine) }
        if handsOff, await stillInBackground() {
            await appDidEnterBackground()
            // The first answers: checked every 250 ms on the courier's clock while
            // `awaitsFirstAnswersFromHandOffs`, until the cap (or what is left of the window), or
            // until the calling task is cancelled.
            let left = window - (clock.elapsed() - start), step = Duration.milliseconds(250)
            for _ in 0..<max(0, Int(min(firstAnswersWithin, left) / step)) {  // the loop's bound
                guard awaitsFirstAnswersFromHandOffs, !Task.isCancelled else { break }
                try? await clock.sleep(clock.elapsed() + step)
            }
        }
        let left = pendingCount - handedOffCount
        return (left == 0, left > 0)
    }

    /// What a background task should do when it runs: deliver within `budget` (ended early by
    /// cancellation when iOS expires the task) what the background session does not have,
    /// returning as soon as nothing else is left, then say whether it finished and whether
    /// another background request is needed (messages handed off are the system's: they need
    /// neither). Platform-neutral and tested; the Apple-only code only calls it.
    func runBackgroundDelivery(within budget: Duration) async -> (success: Bool, reschedule: Bool) {
        let summary = await deliverPending(within: budget)
        let left = summary.remaining - summary.handedOff
        return (left == 0, left > 0)
    }
}

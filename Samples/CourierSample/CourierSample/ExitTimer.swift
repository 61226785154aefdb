#if DEBUG
import SwiftUI
import UIKit
import os

/// "Exit N s after leaving the screen", in debug builds: `exit(0)` in the background stands for
/// iOS ending a suspended app, which keeps its background uploads going (a force-quit from the
/// app switcher cancels them), so the next launch finds what a real relaunch would (check 2).
@MainActor @Observable
final class ExitTimer {
    var isArmed = false
    /// Leaving the screen, Courier delivers for 20 s, then hands off what is pending (5 s before
    /// its 25 s budget ends): exit later than 20 s to test the hand-off, earlier for the engine.
    var seconds = 22
    @ObservationIgnored private var backgroundTask = UIBackgroundTaskIdentifier.invalid
    @ObservationIgnored private var countdown: Task<Void, Never>?
    @ObservationIgnored private let logger = Logger(subsystem: "com.example.courier-sample", category: "debug")

    func sceneDidChange(to phase: ScenePhase) {
        switch phase {
        case .background where isArmed: start()
        case .active: stop()
        default: break
        }
    }

    private func start() {
        guard countdown == nil else { return }
        // A background task of its own keeps the app running through the countdown; without it
        // iOS may suspend the app first. Should iOS end that time sooner, the app exits then.
        backgroundTask = UIApplication.shared.beginBackgroundTask(withName: "Debug exit timer") { [weak self] in
            MainActor.assumeIsolated { self?.quit(because: "the background time ran out") }
        }
        let seconds = seconds
        countdown = Task { [weak self] in
            try? await Task.sleep(for: .seconds(seconds))
            guard !Task.isCancelled else { return }
            self?.quit(because: "\(seconds) s after leaving the screen")
        }
    }

    private func stop() {
        countdown?.cancel()
        countdown = nil
        guard backgroundTask != .invalid else { return }
        UIApplication.shared.endBackgroundTask(backgroundTask)
        backgroundTask = .invalid
    }

    /// The figures of check 2 go to the unified log first: what was left, and what iOS had.
    private func quit(because reason: String) {
        let model = AppDelegate.current?.model
        let pending = model?.pendingCount ?? 0, handedOff = model?.handedOffCount ?? 0
        logger.notice("exit(0), \(reason, privacy: .public): \(pending) pending, \(handedOff) handed off")
        exit(0)
    }
}

/// The timer's controls on the Debug tab.
struct ExitTimerSection: View {
    @Bindable var timer: ExitTimer

    var body: some View {
        Section {
            Toggle("Exit after leaving the screen", isOn: $timer.isArmed)
            Stepper("After \(timer.seconds) s", value: $timer.seconds, in: 1...28)
        } header: {
            Text("Exit timer (check 2; debug builds)")
        } footer: {
            Text("exit(0) once the app has been off screen this long, as iOS ends a suspended app (a force-quit "
                + "would cancel its background uploads). Courier hands off 20 s after the app leaves the screen.")
        }
    }
}
#endif

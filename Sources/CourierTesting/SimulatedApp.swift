@_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import Foundation

/// An app that uses background hand-off, on a `SimulatedBackgroundSystem` and a
/// `SimulatedFileSystem`: it opens its courier at every launch (handing off at once when the
/// system launched it in the background), uses its window and pauses when it leaves the screen,
/// and takes its messages back when it returns, as the lifecycle integration (`lifecycle: .automatic`) does on
/// iOS. A kill stops the dying process's file writes at that instant; the next launch closes
/// what is left of it and opens the log afresh.
public final class SimulatedApp {
    public let system: SimulatedBackgroundSystem
    public let fileSystem: SimulatedFileSystem
    public let directory = URL(fileURLWithPath: "/app/outbox")
    private let base: Courier.Configuration
    private let current = Locked<Courier?>(nil)
    private let opened = Locked(0)

    /// An app whose requests (foreground and background) go to `server`. `configuration`
    /// gives the app's settings; the clock, wall time, transport, file system and session are
    /// the simulation's.
    public init(
        server: any DeliveryTransport, configuration: Courier.Configuration = Courier.Configuration(),
        model: SimulatedBackgroundSystem.Model = SimulatedBackgroundSystem.Model()
    ) {
        let fileSystem = SimulatedFileSystem()
        self.fileSystem = fileSystem
        self.base = configuration
        system = SimulatedBackgroundSystem(transport: server, readBody: { fileSystem.contents(of: $0) }, model: model)
        system.onKill = { fileSystem.stopAfter(operations: 0) }
        system.launchApp = { [unowned self] reason in await self.open(inBackground: reason == .backgroundEvents) }
        // The system's steps wait for the courier to be done with each (deterministic runs).
        system.settleApp = { [unowned self] in await self.courier?.settle() }
        // After a wake's events (as the iOS adapter does): hand off what is pending.
        system.didFinishEvents = { [unowned self] in
            guard system.appState != .foreground, let courier else { return }
            await courier.appDidEnterBackground()
        }
    }

    /// Whether `enterBackground()` keeps the app up, before iOS suspends it, while a destination
    /// its hand-off went to blind has not answered, as the lifecycle integration does within
    /// its background task (the default). False: suspended at once, as an app without the
    /// integration (tests of what happens while suspended).
    public var hearsFirstAnswersBeforeSuspending: Bool {
        get { hearsFirstAnswers.withLock { $0 } }
        set { hearsFirstAnswers.withLock { $0 = newValue } }
    }
    private let hearsFirstAnswers = Locked(true)

    /// Whether a process the system launched in the background pauses its engine at once (the
    /// default), as an app whose lifecycle integration is wired before any event comes. False
    /// models the order iOS may choose at a cold relaunch: completions heard by a courier
    /// that nothing has told where the app is.
    public var pausesEngineAtBackgroundLaunch: Bool {
        get { pausesAtBackgroundLaunch.withLock { $0 } }
        set { pausesAtBackgroundLaunch.withLock { $0 = newValue } }
    }
    private let pausesAtBackgroundLaunch = Locked(true)

    /// The courier of the running process (nil before the first launch).
    public var courier: Courier? { current.withLock { $0 } }
    /// Couriers opened so far (launches and relaunches).
    public var openCount: Int { opened.withLock { $0 } }

    /// Sends a message from the running app; nil if the app is not running or `send` threw.
    public func send(_ text: String, to url: URL) -> MessageID? {
        guard system.appState != .notRunning else { return nil }
        return try? courier?.send(["text": text], to: url)
    }

    /// How long the app runs after it leaves the screen, before iOS suspends it: the lifecycle
    /// integration's background task (`Courier.backgroundBudget`, 25 s, the default). Zero: it
    /// hands off at once (what the hand-off's own scenarios measure).
    public var backgroundWindow: Duration {
        get { window.withLock { $0 } }
        set { window.withLock { $0 = newValue } }
    }
    private let window = Locked(Courier.backgroundBudget)

    /// The app leaves the screen and uses its window in the order the lifecycle integration
    /// does (`Courier.useBackgroundWindow`), one step of the system at a time so that a run
    /// stays deterministic: the engine delivers first (unless paused), for the window less
    /// `Courier.handOffReserve`, in 250 ms steps of the system's clock; what is left is handed
    /// off (in the background: those tasks are discretionary), and the app stays up while a
    /// destination the hand-off went to blind has not answered (at most 10 s, polled every
    /// 250 ms). Then its engine stops, and iOS suspends it.
    public func enterBackground() async {
        guard system.appState == .foreground, let courier else { return }
        system.enterBackground()
        let engine = backgroundWindow - Courier.handOffReserve
        if engine > .zero, !courier.isPaused {
            courier.retryNow()
            // Bounded: the engine's share of the window, in 250 ms steps.
            for _ in 0..<Int(engine / .milliseconds(250)) where courier.pendingCount > 0 {
                await system.advance(by: .milliseconds(250))
            }
        }
        if system.appState == .background {
            await courier.appDidEnterBackground()
            courier.pause()
            await courier.settle()
            // Bounded: 40 turns of 250 ms.
            for _ in 0..<40
            where hearsFirstAnswersBeforeSuspending && system.appState == .background
                && courier.awaitsFirstAnswersFromHandOffs
            {
                await system.advance(by: .milliseconds(250))
            }
        }
        courier.pause()
        system.suspend()
        await courier.settle()
    }

    /// The user brings the app back (launching it if it is not running).
    public func enterForeground() async {
        let wasRunning = system.appState != .notRunning
        await system.bringToForeground()
        guard wasRunning, let courier else { return }
        courier.appDidEnterForeground()
        // A kill armed with `kill(afterInteractions:)` may come at one of the cancellations:
        // a dead process's courier delivers nothing more, and is closed at the next launch.
        guard system.appState != .notRunning else { return }
        courier.resume()
        await courier.settle()
    }

    private func open(inBackground: Bool) async {
        if let old = current.withLock({ c -> Courier? in
            defer { c = nil }; return c
        }) {
            await old.close()
        }
        fileSystem.killProcess()
        var configuration = base
        configuration.fileSystem = fileSystem
        system.configure(&configuration)
        guard let courier = try? Courier(directory: directory, configuration: configuration) else { return }
        current.withLock { $0 = courier }
        opened.withLock { $0 += 1 }
        // Launched in the background: the engine stays still; the hand-off follows the
        // completions the system delivers (`didFinishEvents`). Opened by the user: messages
        // handed off by an earlier process come back (`didBecomeActive` on iOS).
        if !inBackground {
            courier.appDidEnterForeground()
        } else if pausesEngineAtBackgroundLaunch {
            courier.pause()
        }
        await courier.settle()
    }
}

/// Why it is `Sendable`: its mutable state is behind mutexes; the rest is immutable.
extension SimulatedApp: @unchecked Sendable {}

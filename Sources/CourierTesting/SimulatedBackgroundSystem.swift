@_spi(CourierTesting) import CourierKit
import CourierLog
import Foundation

/// The system side of background uploads, simulated on virtual time: it keeps running upload
/// tasks against a transport while the app is suspended or not running, holds their
/// completions until it wakes or relaunches the app, and can kill or force-quit the app at
/// any point. Tests and `make bench-background` drive it; nothing sleeps.
///
///     let system = SimulatedBackgroundSystem(transport: server, readBody: { fs.contents(of: $0) })
///     system.launchApp = { reason in … open a Courier with system.configure(&config) … }
///     await system.launch(inBackground: false)
///     system.suspend()                       // the app called appDidEnterBackground()
///     await system.advance(by: .seconds(1800))
///
/// The model (`Model`): a task starts at its earliest begin date, or, if it was created while
/// the app was not in the foreground, once the rate limiter's delay since its creation has
/// passed if that is later, plus the discretionary delay (the rate limiter's delay doubles at
/// each background wake or relaunch and is reset when the app comes to the foreground, as
/// Apple describes); a request takes `requestDuration` (none by default), at most
/// `connectionsPerHost` at once. A completion is delivered at once to an app that runs (in the
/// foreground, or in the background before it is suspended); for a suspended app the system
/// holds it, and once the session is idle it wakes the app (`wakeDelay` later) and delivers
/// every completion held; for an app that is not running it relaunches it in the
/// background (`launchApp`) and delivers them to the new process's session. A force-quit
/// cancels every task and relaunches nothing. A completion counts as heard when its handler
/// is called: an app killed while handling it loses it (Courier reconciles at the next open).
///
/// A run is deterministic: the same app, seeds and steps give the same figures, run after run.
/// Completions are heard one at a time, in the order the tasks ended (a background session's
/// delegate queue is serial), and after every step (a completion heard, a wake, the clock
/// moved on) the system waits for the app to be done with it (`settleApp`) before it takes the
/// next: the app's tasks run on real threads, and without that wait how much of its reaction
/// came before the system's next step was left to the thread scheduler.
public final class SimulatedBackgroundSystem {
    /// The rules the simulated system follows.
    public struct Model: Sendable {
        /// The rate limiter's first delay for tasks created in the background. The default is 1 s.
        public var rateLimiterInitialDelay: Duration = .seconds(1)
        /// Its largest delay. The default is 60 s.
        public var rateLimiterMaximumDelay: Duration = .seconds(60)
        /// From the moment the session is idle with completions held (no request running, no
        /// task that may start) to the wake (or relaunch) that delivers them. The default is 1 s.
        public var wakeDelay: Duration = .seconds(1)
        /// How much later than its begin date a task created while the app was not in the
        /// foreground starts, on top of the rate limiter: iOS treats such a task as
        /// discretionary and may hold it for hours, waiting for Wi-Fi or power. The default is 0.
        public var discretionaryDelay: Duration = .zero
        /// From a request's start to its completion. The default is 0 (instant).
        public var requestDuration: Duration = .zero
        /// How many tasks to one host run at once, as the session's
        /// `httpMaximumConnectionsPerHost` (6 on iOS); the others wait for a connection. The
        /// default is nil: no limit.
        public var connectionsPerHost: Int?
        /// A model with the defaults.
        public init() {}
    }

    /// Why `launchApp` is called.
    public enum LaunchReason: Sendable, Equatable {
        /// The user opened the app.
        case user
        /// The system relaunched it in the background to deliver completions.
        case backgroundEvents
    }

    /// Where the app is.
    public enum AppState: Sendable, Equatable {
        case foreground
        /// In the background and still running (the seconds iOS grants after
        /// `didEnterBackground`): completions reach it at once, without a wake; the tasks it
        /// makes are the background's (rate limiter, discretionary delay).
        case background
        case suspended
        case notRunning
    }

    /// The network the device is on. A task whose request may not use it waits, as a
    /// background session's tasks wait for connectivity (`BackgroundUploadRequest.mayUse`).
    public struct Network: Sendable, Equatable {
        public var isCellular: Bool
        public var isExpensive: Bool
        public var isConstrained: Bool

        public init(isCellular: Bool, isExpensive: Bool, isConstrained: Bool) {
            self.isCellular = isCellular
            self.isExpensive = isExpensive
            self.isConstrained = isConstrained
        }

        /// Wi-Fi, neither expensive nor constrained (the default).
        public static let wifi = Network(isCellular: false, isExpensive: false, isConstrained: false)
        /// Cellular, which the system marks expensive.
        public static let cellular = Network(isCellular: true, isExpensive: true, isConstrained: false)
        /// Wi-Fi in Low Data Mode.
        public static let lowDataWiFi = Network(isCellular: false, isExpensive: false, isConstrained: true)

        func allows(_ request: BackgroundUploadRequest) -> Bool {
            request.mayUse(cellular: isCellular, expensive: isExpensive, constrained: isConstrained)
        }
    }

    /// Counts of what happened, for assertions and the benchmark.
    public struct Statistics: Sendable, Equatable {
        public var tasksCreated = 0
        public var tasksCancelled = 0
        public var requests = 0
        public var wakes = 0
        public var relaunches = 0
        public var completionsLost = 0
        /// A task started while another live task or an engine attempt had the same message.
        public var inFlightTwice = 0
        /// A task started and found no body file.
        public var missingBodies = 0
        /// Engine requests (made by the app while it runs).
        public var engineRequests = 0
    }

    let clock: ManualClock
    let transport: any DeliveryTransport
    /// Reads a body file as the system does (it runs in its own process: a fault injected
    /// into the app's file system does not reach it).
    let readBody: @Sendable (String) -> [UInt8]?
    let epoch: Date
    public let model: Model
    let state = Locked(SystemState())

    /// Opens the app: set by the test, called by `launch(inBackground:)` and by the system when
    /// it relaunches the app. It must open a `Courier` configured with `configure(_:)`.
    public var launchApp: (@Sendable (LaunchReason) async -> Void)? {
        get { state.withLock { $0.launchApp } }
        set { state.withLock { $0.launchApp = newValue } }
    }

    /// Called after a wake or background relaunch delivered the completions it held (as iOS
    /// calls `urlSessionDidFinishEvents(forBackgroundURLSession:)`), while the app still runs.
    public var didFinishEvents: (@Sendable () async -> Void)? {
        get { state.withLock { $0.didFinishEvents } }
        set { state.withLock { $0.didFinishEvents = newValue } }
    }

    /// Waits until the running app is done with what the last step gave it (`SimulatedApp` sets
    /// it to its courier's `settle()`): called after each completion heard, each wake or
    /// relaunch, and each move of the clock. Nil: the system does not wait (not deterministic).
    public var settleApp: (@Sendable () async -> Void)? {
        get { state.withLock { $0.settleApp } }
        set { state.withLock { $0.settleApp = newValue } }
    }

    /// Called at the instant a kill armed with `kill(afterInteractions:)` happens (e.g. to stop
    /// the file system, so the dying process writes nothing more).
    public var onKill: (@Sendable () -> Void)? {
        get { state.withLock { $0.onKill } }
        set { state.withLock { $0.onKill = newValue } }
    }

    /// A system running tasks against `transport`, reading body files with `readBody`, on
    /// `clock` (wall time: `epoch` plus the clock's offset).
    public init(
        transport: any DeliveryTransport, readBody: @escaping @Sendable (String) -> [UInt8]?,
        clock: ManualClock = ManualClock(), epoch: Date = Date(timeIntervalSince1970: 1_790_000_000),
        model: Model = Model()
    ) {
        self.transport = transport
        self.readBody = readBody
        self.clock = clock
        self.epoch = epoch
        self.model = model
    }

    /// The wall time now.
    public var now: Date { epoch.addingTimeInterval(clock.now.offset.timeInterval) }
    /// The virtual clock.
    public var manualClock: ManualClock { clock }
    public var appState: AppState { state.withLock { $0.appState } }
    /// The network now (Wi-Fi unless set); tasks it does not allow wait for one it does.
    public var network: Network {
        get { state.withLock { $0.network } }
        set { state.withLock { $0.network = newValue } }
    }
    public var statistics: Statistics { state.withLock { $0.statistics } }
    /// Tasks not yet completed (waiting, due or running).
    public var outstandingCount: Int { state.withLock { $0.tasks.count + $0.running.count } }
    /// Sets what a courier of the current app process needs: the clock, the wall time, a
    /// transport for its engine (which counts requests that overlap a task of the same
    /// message), and `backgroundUploads` with a session of this process.
    public func configure(_ configuration: inout Courier.Configuration) {
        let process = state.withLock { $0.process }
        configuration.clock = clock
        configuration.now = { [epoch, clock] in epoch.addingTimeInterval(clock.now.offset.timeInterval) }
        configuration.transport = EngineTransport(system: self)
        var uploads =
            configuration.backgroundUploads
            ?? Courier.BackgroundUploads(session: Session(system: self, process: process))
        uploads.session = Session(system: self, process: process)
        configuration.backgroundUploads = uploads
    }
}

/// Why it is `Sendable`: every mutable property is in `state`, behind its lock.
extension SimulatedBackgroundSystem: @unchecked Sendable {}

extension Duration {
    /// In seconds, as `Date` counts.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

struct SystemTask {
    var task: BackgroundUploadTask
    var request: BackgroundUploadRequest
    var startOffset: Duration
    var process: Int
}

/// A task whose request has started and whose completion comes at `end`.
struct RunningRequest {
    var task: SystemTask
    var host: String
    var end: Duration
    var completion: BackgroundUploadCompletion
}

struct SystemState {
    var appState = SimulatedBackgroundSystem.AppState.notRunning
    var network = SimulatedBackgroundSystem.Network.wifi
    /// The app process; a kill or relaunch makes a new one, and the old one's session goes dead.
    var process = 0
    var processAlive = false
    var handler: (@Sendable (BackgroundUploadCompletion) async -> Void)?
    var handlerProcess = -1
    var tasks: [Int: SystemTask] = [:]
    /// Tasks whose request has started (`Model.requestDuration`), by identifier.
    var running: [Int: RunningRequest] = [:]
    var nextIdentifier = 1
    var held: [BackgroundUploadCompletion] = []
    var wakeAt: Duration?
    var rateLimiterDelay: Duration = .zero
    var statistics = SimulatedBackgroundSystem.Statistics()
    var killAfter: Int?
    var launchApp: (@Sendable (SimulatedBackgroundSystem.LaunchReason) async -> Void)?
    var onKill: (@Sendable () -> Void)?
    var didFinishEvents: (@Sendable () async -> Void)?
    var settleApp: (@Sendable () async -> Void)?
    /// Messages an engine attempt of the app has in flight now.
    var engineInFlight: [String: Int] = [:]
}

extension SystemState {
    /// Whether a task, waiting or running, carries the message of `key` (its Idempotency-Key).
    func carries(_ key: String?) -> Bool {
        tasks.values.contains { $0.request.headers["Idempotency-Key"] == key }
            || running.values.contains { $0.task.request.headers["Idempotency-Key"] == key }
    }

    /// Whether a task to `host` may start now (`Model.connectionsPerHost`).
    func hasConnection(to host: String, limit: Int?) -> Bool {
        guard let limit else { return true }
        return running.values.filter { $0.host == host }.count < limit
    }
}

import Courier
import CourierLog
import Foundation

/// The app's lifecycle, and time passing.
extension SimulatedBackgroundSystem {
    /// Starts a new app process (`launchApp(.user)`), in the foreground unless told.
    public func launch(inBackground: Bool = false) async {
        let launch = state.withLock { s -> (@Sendable (LaunchReason) async -> Void)? in
            s.process += 1
            s.processAlive = true
            s.handler = nil
            s.appState = inBackground ? .suspended : .foreground
            if !inBackground { s.rateLimiterDelay = .zero }
            return s.launchApp
        }
        await launch?(.user)
        await deliverHeld()
    }

    /// The app left the screen and iOS suspended it (after it handed its messages off).
    public func suspend() {
        state.withLock { if $0.processAlive { $0.appState = .suspended } }
    }

    /// The user brought the app back: it runs in the foreground again (launched if it was not
    /// running); held completions are delivered; the rate limiter is reset.
    public func bringToForeground() async {
        let running = state.withLock { s -> Bool in
            guard s.processAlive else { return false }
            s.appState = .foreground
            s.rateLimiterDelay = .zero
            return true
        }
        if running { await deliverHeld() } else { await launch() }
    }

    /// The app process dies now (a crash, or iOS ending it): its session goes dead; tasks go on.
    public func kill() {
        let hook = state.withLock { s in Self.killLocked(&s) }
        hook?()
    }

    /// Arms a kill at the `count`th interaction from now between the system and the app
    /// (a task made, a task cancelled, a completion handed to the app's handler, which then
    /// never hears it).
    public func kill(afterInteractions count: Int) {
        state.withLock { $0.killAfter = max(1, count) }
    }

    /// The user force-quits the app: it dies, and the system cancels every task and relaunches
    /// nothing for them.
    public func forceQuit() {
        let hook = state.withLock { s -> (@Sendable () -> Void)? in
            let hook = s.processAlive ? Self.killLocked(&s) : nil
            s.statistics.tasksCancelled += s.tasks.count
            s.tasks.removeAll()
            s.statistics.completionsLost += s.held.count
            s.held.removeAll()
            s.wakeAt = nil
            return hook
        }
        hook?()
    }

    /// Moves virtual time forward by `duration`, running every task whose time comes (and
    /// whose request may use the network), in order, and waking or relaunching the app to
    /// hear their completions.
    public func advance(by duration: Duration) async {
        let target = clock.now.offset + duration
        await deliverHeld()
        // Each turn runs one task or one wake, or ends: bounded by the tasks made and wakes due.
        while true {
            let next = state.withLock { s -> Duration? in
                let task = s.tasks.values.filter { s.network.allows($0.request) }.map(\.startOffset).min()
                guard let wake = s.wakeAt else { return task }
                return min(task ?? wake, wake)
            }
            guard let next, next <= target else { break }
            if next > clock.now.offset { await clock.advance(by: next - clock.now.offset) }
            if let wake = state.withLock({ $0.wakeAt }), wake <= clock.now.offset {
                await self.wake()
                continue
            }
            let due = state.withLock { s -> SystemTask? in
                let first = s.tasks.values.filter { $0.startOffset <= clock.now.offset && s.network.allows($0.request) }
                    .min { ($0.startOffset, $0.task.identifier) < ($1.startOffset, $1.task.identifier) }
                if let first { s.tasks[first.task.identifier] = nil }
                return first
            }
            if let due { await run(due) }
        }
        if target > clock.now.offset { await clock.advance(by: target - clock.now.offset) }
        await deliverHeld()
    }

    /// Performs one task's request and reports its completion.
    private func run(_ task: SystemTask) async {
        let key = task.request.headers["Idempotency-Key"] ?? ""
        state.withLock { s in
            s.statistics.requests += 1
            if s.engineInFlight[key, default: 0] > 0 { s.statistics.inFlightTwice += 1 }
        }
        let outcome: DeliveryOutcome
        if let body = readBody(task.request.bodyFile.path) {
            outcome = await transport.deliver(
                DeliveryRequest(
                    url: task.request.url, headers: task.request.headers, body: Data(body), timeout: .seconds(60),
                    messageID: MessageID(key) ?? MessageID(), attempt: 0))
        } else {
            state.withLock { $0.statistics.missingBodies += 1 }
            outcome = .failure(TransportFailure(.other, "the body file is missing"))
        }
        await complete(BackgroundUploadCompletion(task: task.task, outcome: outcome))
    }

    /// A completion: heard at once by an app in the foreground, else held for a wake.
    func complete(_ completion: BackgroundUploadCompletion) async {
        let deliverNow = state.withLock { s -> Bool in
            if s.appState == .foreground && s.processAlive && s.handler != nil { return true }
            s.held.append(completion)
            if s.wakeAt == nil { s.wakeAt = clock.now.offset + model.wakeDelay }
            return false
        }
        if deliverNow { await hand(completion) }
    }

    /// The system wakes the suspended app, or relaunches it, and hands it what it held.
    private func wake() async {
        enum Action { case none, deliver, relaunch((@Sendable (LaunchReason) async -> Void)?) }
        let action = state.withLock { s -> Action in
            s.wakeAt = nil
            guard !s.held.isEmpty else { return .none }
            let next = s.rateLimiterDelay == .zero ? model.rateLimiterInitialDelay : s.rateLimiterDelay * 2
            s.rateLimiterDelay = min(next, model.rateLimiterMaximumDelay)
            if s.processAlive {
                if s.appState != .foreground { s.statistics.wakes += 1 }
                return .deliver
            }
            s.statistics.relaunches += 1
            s.process += 1
            s.processAlive = true
            s.handler = nil
            s.appState = .suspended
            return .relaunch(s.launchApp)
        }
        switch action {
        case .none: return
        case .deliver: break
        case .relaunch(let launch): await launch?(.backgroundEvents)
        }
        await deliverHeld(evenIfSuspended: true)
        let finish = state.withLock { s in s.processAlive ? s.didFinishEvents : nil }
        await finish?()
    }

    /// Hands held completions to the app's handler if it may hear them now, all at once, as
    /// iOS's delegate queue hands them to Courier's relay, which hears each in its own task.
    func deliverHeld(evenIfSuspended: Bool = false) async {
        // Each turn empties the held list: bounded by the completions that keep coming.
        while true {
            let batch = state.withLock { s -> [BackgroundUploadCompletion] in
                guard s.processAlive, s.handler != nil, evenIfSuspended || s.appState == .foreground else { return [] }
                defer { s.held.removeAll() }
                return s.held
            }
            guard !batch.isEmpty else { return }
            await withTaskGroup(of: Void.self) { group in
                for completion in batch { group.addTask { await self.hand(completion) } }
            }
        }
    }

    /// Calls the handler, unless an armed kill happens at this interaction (then it is lost).
    private func hand(_ completion: BackgroundUploadCompletion) async {
        let (handler, hook) = state.withLock {
            s -> ((@Sendable (BackgroundUploadCompletion) async -> Void)?, (@Sendable () -> Void)?) in
            if let hook = Self.tick(&s) {
                s.statistics.completionsLost += 1
                return (nil, hook)
            }
            return (s.handler, nil)
        }
        hook?()
        await handler?(completion)
    }

    /// Counts an interaction; performs an armed kill when its count is reached.
    static func tick(_ s: inout SystemState) -> (@Sendable () -> Void)?? {
        guard let left = s.killAfter else { return nil }
        guard left <= 1 else {
            s.killAfter = left - 1
            return nil
        }
        s.killAfter = nil
        return .some(killLocked(&s))
    }

    static func killLocked(_ s: inout SystemState) -> (@Sendable () -> Void)? {
        s.processAlive = false
        s.handler = nil
        s.appState = .notRunning
        s.engineInFlight.removeAll()
        return s.onKill
    }
}

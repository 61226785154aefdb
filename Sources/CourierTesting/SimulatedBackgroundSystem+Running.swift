import CourierKit
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
        await settle()
        await deliverHeld()
    }

    /// The app left the screen and runs in the background for a while (its background task).
    public func enterBackground() {
        state.withLock { if $0.processAlive && $0.appState == .foreground { $0.appState = .background } }
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
            s.statistics.tasksCancelled += s.tasks.count + s.running.count
            s.tasks.removeAll()
            s.running.removeAll()
            s.statistics.completionsLost += s.held.count
            s.held.removeAll()
            s.wakeAt = nil
            return hook
        }
        hook?()
    }

    /// Moves virtual time forward by `duration`, running every task whose time comes (and
    /// whose request may use the network, and has a connection to its host), in order, and
    /// waking or relaunching the app to hear their completions. At one instant, requests end
    /// first, then the app wakes, then tasks start.
    public func advance(by duration: Duration) async {
        let target = clock.now.offset + duration
        await deliverHeld()
        // Each turn ends one request, runs one wake or starts one task, or ends: bounded by the
        // tasks made and wakes due.
        while true {
            guard
                let next = state.withLock({ s in
                    scheduleWake(&s); return nextEvent(s)
                }), next <= target
            else {
                break
            }
            if next > clock.now.offset {
                await clock.advance(by: next - clock.now.offset)
                await settle()
            }
            let now = clock.now.offset
            let ended = state.withLock { s -> RunningRequest? in
                guard
                    let first = s.running.values.filter({ $0.end <= now })
                        .min(by: { ($0.end, $0.task.task.identifier) < ($1.end, $1.task.task.identifier) })
                else { return nil }
                s.running[first.task.task.identifier] = nil
                return first
            }
            if let ended {
                await complete(ended.completion)
                continue
            }
            if let wake = state.withLock({ $0.wakeAt }), wake <= now {
                await self.wake()
                continue
            }
            let due = state.withLock { s -> SystemTask? in
                let first = startable(s).filter { $0.startOffset <= now }
                    .min { ($0.startOffset, $0.task.identifier) < ($1.startOffset, $1.task.identifier) }
                if let first { s.tasks[first.task.identifier] = nil }
                return first
            }
            if let due { await run(due) }
        }
        if target > clock.now.offset {
            await clock.advance(by: target - clock.now.offset)
            await settle()
        }
        await deliverHeld()
    }

    /// Waits for the running app to be done with the last step (`settleApp`).
    func settle() async {
        let settleApp = state.withLock { s in s.processAlive ? s.settleApp : nil }
        await settleApp?()
    }

    /// The waiting tasks that may start once their time comes: their request may use the
    /// network, and their host has a free connection.
    private func startable(_ s: SystemState) -> [SystemTask] {
        s.tasks.values.filter {
            s.network.allows($0.request)
                && s.hasConnection(to: $0.request.url.host ?? "", limit: model.connectionsPerHost)
        }
    }

    /// With completions held and the session idle now (no request running, no task that may
    /// start now), the app's wake comes `wakeDelay` from now: iOS resumes a suspended app once
    /// the session's work at hand is done, not at each completion ("eventually all the tasks
    /// complete and nsurlsessiond resumes your app", Quinn, *NSURLSession's Resume Rate
    /// Limiter*), so a batch of uploads costs one wake, and one doubling of the rate limiter.
    private func scheduleWake(_ s: inout SystemState) {
        let now = clock.now.offset
        guard s.wakeAt == nil, !s.held.isEmpty, s.running.isEmpty,
            !startable(s).contains(where: { $0.startOffset <= now })
        else { return }
        s.wakeAt = now + model.wakeDelay
    }

    /// When the next request ends, the app wakes or a task may start, if any.
    private func nextEvent(_ s: SystemState) -> Duration? {
        let start = startable(s).map(\.startOffset).min()
        let end = s.running.values.map(\.end).min()
        return [start, end, s.wakeAt].compactMap { $0 }.min()
    }

    /// Performs one task's request (the server sees it now) and reports its completion, at
    /// once or `Model.requestDuration` later.
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
        let completion = BackgroundUploadCompletion(task: task.task, outcome: outcome)
        guard model.requestDuration > .zero else { return await complete(completion) }
        state.withLock { s in
            s.running[task.task.identifier] = RunningRequest(
                task: task, host: task.request.url.host ?? "", end: clock.now.offset + model.requestDuration,
                completion: completion)
        }
    }

    /// A completion: heard at once by an app in the foreground, else held for a wake.
    func complete(_ completion: BackgroundUploadCompletion) async {
        let deliverNow = state.withLock { s -> Bool in
            let running = s.appState == .foreground || s.appState == .background
            if running && s.processAlive && s.handler != nil { return true }
            s.held.append(completion)
            return false
        }
        if deliverNow {
            await hand(completion)
            await settle()
        }
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
        await settle()
        await deliverHeld(evenIfSuspended: true)
        let finish = state.withLock { s in s.processAlive ? s.didFinishEvents : nil }
        await finish?()
        await settle()
    }

    /// Hands held completions to the app's handler if it may hear them now, one at a time in
    /// the order the tasks ended (a background session's delegate queue is serial), the app
    /// settled after each (`settleApp`).
    func deliverHeld(evenIfSuspended: Bool = false) async {
        // Each turn empties the held list: bounded by the completions that keep coming.
        while true {
            let batch = state.withLock { s -> [BackgroundUploadCompletion] in
                let running = s.appState == .foreground || s.appState == .background
                guard s.processAlive, s.handler != nil, evenIfSuspended || running else { return [] }
                defer {
                    s.held.removeAll()
                    s.wakeAt = nil  // nothing left for a wake to bring
                }
                return s.held
            }
            guard !batch.isEmpty else { return }
            for completion in batch {
                await hand(completion)
                await settle()
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

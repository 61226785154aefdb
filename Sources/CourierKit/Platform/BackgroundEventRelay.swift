import CourierLog
import Foundation

/// The platform-neutral half of a background `URLSession`'s delegate
/// (`URLSessionBackgroundUploads`, iOS only): it holds completions until a courier listens,
/// runs each through the courier's handler, and answers the system (the completion handler of
/// `application(_:handleEventsForBackgroundURLSession:completionHandler:)`, or SwiftUI's
/// `.backgroundTask(.urlSession(_:))`) only once every completion of the batch was handled
/// and the courier handed off what it could: answering lets iOS suspend the app again.
/// Compiled and tested everywhere; the Apple adapter only forwards delegate calls to it.
/// (Checked `Sendable`: everything mutable is in `state`, behind its lock.)
final class BackgroundEventRelay: Sendable {
    typealias Handler = @Sendable (BackgroundUploadCompletion) async -> Void
    /// Everything mutable, behind one lock.
    private struct State {
        var handler: Handler?
        var held: [BackgroundUploadCompletion] = []
        var running: [UInt64: Task<Void, Never>] = [:]
        var nextToken: UInt64 = 0
        /// `urlSessionDidFinishEvents` calls not yet answered.
        var finishedBatches = 0
        /// The system's completion handlers not yet called, by token, each with the task that
        /// calls it at its deadline.
        var systemHandlers: [UInt64: (handler: UncheckedSendable<() -> Void>, deadline: Task<Void, Never>)] = [:]
        var finished: (@Sendable () async -> Void)?
    }
    private let state = Locked(State())
    /// Calls the system's completion handlers (UIKit's: on the main thread).
    let callOnMain: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// How long `eventsFinished` may take before the system is answered anyway: a background
    /// wake is short, and an app that does not answer in time is suspended or ended.
    static let eventsFinishedLimit: Duration = .seconds(10)
    /// The longest the system waits for its answer, from when it hands its completion handler
    /// over, whatever happens meanwhile: no courier listens (its open failed, or this version
    /// of the app no longer configures background uploads), a handler hangs, or no
    /// `urlSessionDidFinishEvents` comes. Apple asks for the answer once the events are
    /// handled; an app that keeps the system waiting past its background time is ended and
    /// throttled. Completions still held stay held: the next open reconciles their tasks.
    static let answerLimit: Duration = .seconds(20)
    private let clock: any Clock<Duration>

    init(
        clock: any Clock<Duration> = ContinuousClock(),
        callOnMain: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) {
        self.clock = clock
        self.callOnMain = callOnMain
    }

    /// Run after a batch's completions were handled, before the system is answered (the
    /// lifecycle integration hands off from there when the app is in the background).
    var eventsFinished: (@Sendable () async -> Void)? {
        get { state.withLock { $0.finished } }
        set { state.withLock { $0.finished = newValue } }
    }

    /// The courier's handler; completions held so far go to it now.
    func setHandler(_ handler: @escaping Handler) {
        let waiting = state.withLock { state -> [BackgroundUploadCompletion] in
            state.handler = handler
            defer { state.held.removeAll() }
            return state.held
        }
        for completion in waiting { start(completion, handler) }
        answerWhenSettled()
    }

    /// A task completed (the delegate's `didCompleteWithError`).
    func completed(_ completion: BackgroundUploadCompletion) {
        let listener = state.withLock { state -> Handler? in
            if state.handler == nil { state.held.append(completion) }
            return state.handler
        }
        if let listener { start(completion, listener) }
    }

    /// The delegate's `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    func didFinishEvents() {
        state.withLock { $0.finishedBatches += 1 }
        answerWhenSettled()
    }

    /// Stores the system's completion handler (UIKit's app delegate entry point). It is called
    /// once: when the batch is settled, or at `answerLimit` if that comes first.
    func storeSystemCompletionHandler(_ handler: @escaping () -> Void) {
        state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            let deadline = Task { [weak self, clock] in
                try? await clock.sleep(for: Self.answerLimit)
                guard !Task.isCancelled, let self else { return }
                answer(self.state.withLock { $0.systemHandlers.removeValue(forKey: token)?.handler }.map { [$0] } ?? [])
            }
            state.systemHandlers[token] = (UncheckedSendable(value: handler), deadline)
        }
        answerWhenSettled()
    }

    /// Returns once the system would be answered (SwiftUI's `.backgroundTask(.urlSession)`).
    func waitForEvents() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            storeSystemCompletionHandler { continuation.resume() }
        }
    }

    /// Completions held for a courier that is not listening yet (tests).
    var heldCount: Int { state.withLock { $0.held.count } }

    /// Returns once no handler is running (before the system is answered; and tests).
    func waitForHandlers() async {
        // Each turn awaits the handlers running at its start.
        while let tasks = state.withLock({ $0.running.isEmpty ? nil : Array($0.running.values) }) {
            for task in tasks { await task.value }
        }
    }

    private func start(_ completion: BackgroundUploadCompletion, _ handler: @escaping Handler) {
        state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.running[token] = Task { [weak self] in
                await handler(completion)
                _ = self?.state.withLock { $0.running.removeValue(forKey: token) }
            }
        }
    }

    /// Once a batch has finished and the system is waiting: waits for every running handler,
    /// lets the courier hand off, then calls the system's completion handlers on the main thread.
    private func answerWhenSettled() {
        Task { [weak self] in
            guard let self else { return }
            // New handlers start only from completions, which the finished batch bounds. A
            // handler that hangs ends this wait at the limit (and the system handler's own
            // deadline answers the system).
            if state.withLock({ !$0.running.isEmpty }) {
                await run({ [weak self] in await self?.waitForHandlers() }, within: Self.answerLimit)
            }
            // Completions still held (no courier listens yet) keep the system waiting:
            // `setHandler` settles again once one does, and the deadline answers if none does.
            let (answer, finished) = state.withLock {
                s -> ([UncheckedSendable<() -> Void>], (@Sendable () async -> Void)?) in
                guard s.finishedBatches > 0, !s.systemHandlers.isEmpty, s.held.isEmpty, s.running.isEmpty else {
                    return ([], nil)
                }
                s.finishedBatches = 0
                defer { s.systemHandlers.removeAll() }
                for entry in s.systemHandlers.values { entry.deadline.cancel() }
                return (s.systemHandlers.sorted { $0.key < $1.key }.map(\.value.handler), s.finished)
            }
            guard !answer.isEmpty else { return }
            if let finished { await run(finished, within: Self.eventsFinishedLimit) }
            self.answer(answer)
        }
    }

    /// Runs `work`, returning when it ends or when `limit` has passed on the relay's clock,
    /// whichever comes first (the work goes on; only the wait ends).
    private func run(_ work: @escaping @Sendable () async -> Void, within limit: Duration) async {
        await firstOf(work, orAfter: { [clock] in try? await clock.sleep(for: limit) }, late: ())
    }

    /// Calls the system's completion handlers, on the main thread.
    private func answer(_ handlers: [UncheckedSendable<() -> Void>]) {
        guard !handlers.isEmpty else { return }
        let handlers = UncheckedSendable(value: handlers)
        callOnMain { for handler in handlers.value { handler.value() } }
    }
}

/// The relays of the background sessions Courier's configurations name
/// (`BackgroundUploads.urlSession(identifier:)`), by session identifier: what the app
/// delegate's events for a session reach. An app may have background sessions of its own, and
/// Apple allows one session per identifier: events for an identifier no Courier configuration
/// named are not Courier's, and nothing here touches them.
extension BackgroundEventRelay {
    private static let sessions = Locked<[String: BackgroundEventRelay]>([:])

    /// The relay of session `identifier`, made on first use (by the configuration naming it).
    static func named(_ identifier: String, callOnMain: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void)
        -> BackgroundEventRelay
    {
        sessions.withLock { sessions in
            if let existing = sessions[identifier] { return existing }
            let made = BackgroundEventRelay(callOnMain: callOnMain)
            sessions[identifier] = made
            return made
        }
    }

    /// Stores the system's completion handler for session `identifier` if it is Courier's;
    /// false, and `handler` untouched, if no Courier configuration in this process named it.
    static func storeSystemCompletionHandler(forSession identifier: String, _ handler: @escaping () -> Void) -> Bool {
        guard let relay = sessions.withLock({ $0[identifier] }) else { return false }
        relay.storeSystemCompletionHandler(handler)
        return true
    }

    /// Returns once the system would be answered for session `identifier`; at once if it is
    /// not Courier's.
    static func waitForEvents(forSession identifier: String) async {
        await sessions.withLock { $0[identifier] }?.waitForEvents()
    }
}

extension BackgroundUploadCompletion {
    /// The outcome of a finished background task, from what its delegate sees: the task's
    /// HTTP status and `Retry-After`, or its error (server errors do not come as errors). A
    /// background session follows redirects by itself (its delegate is not asked), where
    /// Courier refuses them: an upload whose final URL is not the one it was made for is a
    /// failure, whatever it was answered (a 302 or 303 turns a POST into a GET elsewhere).
    static func outcome(
        statusCode: Int?, retryAfter: String?, error: (any Error)?,
        requestedURL: URL? = nil, finalURL: URL? = nil
    ) -> DeliveryOutcome {
        if let error { return .failure(URLSessionTransport.classify(error)) }
        if let requestedURL, let finalURL, requestedURL != finalURL {
            return .failure(
                TransportFailure(
                    .other,
                    "redirected to \(finalURL.absoluteString): background uploads follow redirects, Courier does not"))
        }
        guard let statusCode else { return .failure(TransportFailure(.other, "not an HTTP response")) }
        return .response(status: statusCode, retryAfter: retryAfter)
    }
}

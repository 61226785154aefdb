#if os(iOS)
import CourierLog
import Foundation

// iOS only. Type-checked for iOS by `make ios-check`; never linked or run here (no Apple
// machine). Thin on purpose: the delegate forwards to `BackgroundEventRelay` (tested on
// Linux), and Courier's hand-off logic is platform-neutral (tested against
// `SimulatedBackgroundSystem`). What a type-check cannot see was checked against Apple's
// documentation, page by page (ARCHITECTURE.md, "Background hand-off").

/// Courier's `BackgroundUploadSession` on iOS: a background `URLSession`
/// (`URLSessionConfiguration.background(withIdentifier:)`, `sessionSendsLaunchEvents = true`,
/// `isDiscretionary = false`) used through its delegate only, as background sessions require.
///
///     var configuration = Courier.Configuration()
///     configuration.backgroundUploads = .urlSession(identifier: "com.example.app.courier")
///
/// Apple allows one session per identifier in a process: `shared(identifier:)` makes it once.
/// (`public`, not `open`: the subclass that refreshes headers is Courier's own.)
public class URLSessionBackgroundUploads: NSObject {
    /// The background session's identifier.
    public let identifier: String
    let relay: BackgroundEventRelay
    /// Set once, in `init`, before any delegate call can come (after `super.init()`, for the
    /// session's delegate is `self`: so never nil once `init` returns).
    private var session: URLSession!
    /// Headers refreshed as uploads begin: set exactly for a `HeaderRefreshingUploads`.
    let refreshHeaders: DelayedUploadRefresh?
    private static let instances = Locked<[String: URLSessionBackgroundUploads]>([:])

    /// The one instance for `identifier` in this process (made, with its session, on first use).
    /// With `refreshHeaders`, the session's delegate implements
    /// `urlSession(_:task:willBeginDelayedRequest:completionHandler:)` and sets fresh headers as
    /// each handed-off upload begins (`DelayedUploadRefresh`); without, it does not implement it,
    /// so the system never wakes the app for it (Apple: implement it only if a request may go
    /// stale). The first call for an identifier decides: build the configuration once, at launch.
    public static func shared(
        identifier: String, refreshHeaders: DelayedUploadRefresh? = nil
    ) -> URLSessionBackgroundUploads {
        instances.withLock { instances in
            if let existing = instances[identifier] { return existing }
            let made =
                refreshHeaders.map { HeaderRefreshingUploads(identifier: identifier, refreshHeaders: $0) }
                ?? URLSessionBackgroundUploads(identifier: identifier, refreshHeaders: nil)
            instances[identifier] = made
            return made
        }
    }

    fileprivate init(identifier: String, refreshHeaders: DelayedUploadRefresh?) {
        self.identifier = identifier
        self.refreshHeaders = refreshHeaders
        relay = BackgroundEventRelay.named(
            identifier, callOnMain: { work in DispatchQueue.main.async(execute: work) })
        super.init()
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sessionSendsLaunchEvents = true
        configuration.isDiscretionary = false
        // nil: the session makes a serial delegate queue.
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    /// UIKit: call from `application(_:handleEventsForBackgroundURLSession:completionHandler:)`
    /// with every identifier the app delegate is given. Returns true if `identifier` is
    /// Courier's (a configuration in this process named it with `.urlSession(identifier:)`):
    /// Courier then calls `completionHandler` on the main thread once every completion of the
    /// batch was logged and the courier handed off what it could, or after 20 seconds at most.
    /// Returns false, and leaves `completionHandler` to the app, for any other identifier (a
    /// background session of the app's own). So build Courier's configuration at launch,
    /// before `application(_:didFinishLaunchingWithOptions:)` returns.
    @discardableResult
    public static func handleEvents(forSession identifier: String, completionHandler: @escaping () -> Void) -> Bool {
        BackgroundEventRelay.storeSystemCompletionHandler(forSession: identifier, completionHandler)
    }

    /// SwiftUI (iOS 16): the action of `.backgroundTask(.urlSession(identifier))`. Returns once
    /// every completion of the batch was logged and the courier handed off what it could (20
    /// seconds at most); at once if `identifier` is not Courier's.
    public static func handleEvents(forSession identifier: String) async {
        await BackgroundEventRelay.waitForEvents(forSession: identifier)
    }
}

/// Why it is `Sendable`: `session` is written once, in `init`; `URLSession` and the relay are
/// thread-safe; `identifier` and `refreshHeaders` are immutable.
extension URLSessionBackgroundUploads: @unchecked Sendable {}

extension URLSessionBackgroundUploads: BackgroundUploadSession {
    public func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = "POST"
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        // Per request (iOS 13+), all three always set, so one session (which allows every
        // network) serves any policy: Apple documents the request's value as overriding the
        // session's for the expensive and constrained flags.
        urlRequest.allowsCellularAccess = request.allowsCellularAccess
        urlRequest.allowsExpensiveNetworkAccess = request.allowsExpensiveNetworkAccess
        urlRequest.allowsConstrainedNetworkAccess = request.allowsConstrainedNetworkAccess
        let task = session.uploadTask(with: urlRequest, fromFile: request.bodyFile)
        // A delayed task (one with a begin date) makes the system ask the delegate as it starts
        // (`willBeginDelayedRequest`): with header refresh every task is delayed, else only one
        // whose begin date lies ahead.
        task.earliestBeginDate = HeaderRefresh.beginDate(of: request, now: Date(), refreshes: refreshHeaders != nil)
        // Both estimates help the system schedule the transfer (iOS 11+; the default of each
        // is "unknown", NSURLSessionTransferSizeUnknown).
        task.countOfBytesClientExpectsToSend = Int64(request.expectedBytesToSend)
        task.countOfBytesClientExpectsToReceive = Int64(request.expectedBytesToReceive)
        task.taskDescription = HeaderRefresh.describe(request)  // the request's, and the tags
        task.resume()
        return BackgroundUploadTask(identifier: task.taskIdentifier, taskDescription: request.taskDescription)
    }

    public func outstandingTasks() async -> [BackgroundUploadTask] {
        await session.allTasks.filter { $0.state != .completed }.map(Self.courierTask)
    }

    public func cancel(_ task: BackgroundUploadTask) { cancel(task, unlessSending: false) }

    /// A task that has sent no byte of its body has not reached the server: cancelling it
    /// duplicates nothing. (`countOfBytesSent` counts body bytes only; a task the system is
    /// retrying after a timeout may read 0 again: `Idempotency-Key` covers that rare case.)
    public func cancelUnlessSending(_ task: BackgroundUploadTask) { cancel(task, unlessSending: true) }

    private func cancel(_ task: BackgroundUploadTask, unlessSending: Bool) {
        session.getAllTasks { tasks in
            let found = tasks.first { Self.matches($0, task) }
            if let found, !unlessSending || found.countOfBytesSent == 0 { found.cancel() }
        }
    }

    private static func matches(_ candidate: URLSessionTask, _ task: BackgroundUploadTask) -> Bool {
        candidate.taskIdentifier == task.identifier
            && (candidate.taskDescription == nil || courierTask(candidate).taskDescription == task.taskDescription)
    }

    /// The task as Courier knows it: with the description Courier gave the request, without the
    /// tags `describe` added.
    private static func courierTask(_ task: URLSessionTask) -> BackgroundUploadTask {
        let description = HeaderRefresh.split(description: task.taskDescription ?? "").courier
        return BackgroundUploadTask(identifier: task.taskIdentifier, taskDescription: description)
    }

    public func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void) {
        relay.setHandler(handler)
    }
}

extension URLSessionBackgroundUploads: URLSessionTaskDelegate {
    /// The status comes from `task.response` (server errors are not errors here). A background
    /// session follows redirects without asking its delegate, so a redirected upload is
    /// reported as a failure (see `BackgroundUploadCompletion.outcome`).
    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let http = task.response as? HTTPURLResponse
        let outcome = BackgroundUploadCompletion.outcome(
            statusCode: http?.statusCode, retryAfter: http?.value(forHTTPHeaderField: "Retry-After"), error: error,
            requestedURL: task.originalRequest?.url, finalURL: task.currentRequest?.url)
        relay.completed(BackgroundUploadCompletion(task: Self.courierTask(task), outcome: outcome))
    }

    public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        relay.didFinishEvents()
    }
}

/// The session's delegate when the app refreshes headers as delayed uploads begin (made with
/// `refreshHeaders`).
private final class HeaderRefreshingUploads: URLSessionBackgroundUploads {
    /// Called on the session's delegate queue as a task with a begin date is about to load (the
    /// system wakes or relaunches the app for it). The completion handler is called exactly
    /// once: with the refreshed request, or `.continueLoading` if nothing changes or the
    /// refresh took longer than `HeaderRefresh.timeLimit`. Named for Objective-C explicitly: the
    /// requirement is optional, and a signature that missed it by a `@Sendable` would never be
    /// called.
    @objc(URLSession:task:willBeginDelayedRequest:completionHandler:)
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willBeginDelayedRequest request: URLRequest,
        completionHandler: @escaping (URLSession.DelayedRequestDisposition, URLRequest?) -> Void
    ) {
        let reply = UncheckedSendable(value: completionHandler)
        guard let url = request.url, let refresh = refreshHeaders else { return reply.value(.continueLoading, nil) }
        let upload = HeaderRefresh.delayedUpload(
            description: task.taskDescription ?? "", url: url, headers: request.allHTTPHeaderFields ?? [:])
        Task {
            guard let fresh = await HeaderRefresh.run(refresh, for: upload) else {
                return reply.value(.continueLoading, nil)
            }
            var updated = request
            updated.allHTTPHeaderFields = HeaderRefresh.merged(upload.headers, with: fresh)
            reply.value(.useNewRequest, updated)
        }
    }
}

extension Courier.BackgroundUploads {
    /// Hand-off to the background `URLSession` named `identifier` (`URLSessionBackgroundUploads`);
    /// with `refreshHeaders`, fresh headers (credentials) are set on each upload as it begins,
    /// hours after its hand-off perhaps (`DelayedUploadRefresh`).
    public static func urlSession(
        identifier: String, refreshHeaders: DelayedUploadRefresh? = nil
    ) -> Courier.BackgroundUploads {
        Courier.BackgroundUploads(
            session: URLSessionBackgroundUploads.shared(identifier: identifier, refreshHeaders: refreshHeaders))
    }
}
#endif

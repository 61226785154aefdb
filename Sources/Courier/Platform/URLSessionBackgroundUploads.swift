#if os(iOS)
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
public final class URLSessionBackgroundUploads: NSObject {
    /// The background session's identifier.
    public let identifier: String
    let relay = BackgroundEventRelay(callOnMain: { work in DispatchQueue.main.async(execute: work) })
    /// Set once, in `init`, before any delegate call can come.
    private var session: URLSession?
    private static let instances = Locked<[String: URLSessionBackgroundUploads]>([:])

    /// The one instance for `identifier` in this process (made, with its session, on first use).
    public static func shared(identifier: String) -> URLSessionBackgroundUploads {
        instances.withLock { instances in
            if let existing = instances[identifier] { return existing }
            let made = URLSessionBackgroundUploads(identifier: identifier)
            instances[identifier] = made
            return made
        }
    }

    private init(identifier: String) {
        self.identifier = identifier
        super.init()
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sessionSendsLaunchEvents = true
        configuration.isDiscretionary = false
        // nil: the session makes a serial delegate queue.
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    /// UIKit: call from `application(_:handleEventsForBackgroundURLSession:completionHandler:)`.
    /// The handler is called on the main thread once every completion of the batch was logged
    /// and the courier handed off what it could.
    public static func handleEvents(forSession identifier: String, completionHandler: @escaping () -> Void) {
        shared(identifier: identifier).relay.storeSystemCompletionHandler(completionHandler)
    }

    /// SwiftUI (iOS 16): the action of `.backgroundTask(.urlSession(identifier))`. Returns once
    /// every completion of the batch was logged and the courier handed off what it could.
    public static func handleEvents(forSession identifier: String) async {
        await shared(identifier: identifier).relay.waitForEvents()
    }
}

/// Why it is `Sendable`: `session` is written once, in `init`; `URLSession` and the relay are
/// thread-safe; `identifier` is immutable.
extension URLSessionBackgroundUploads: @unchecked Sendable {}

extension URLSessionBackgroundUploads: BackgroundUploadSession {
    public func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = "POST"
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        guard let task = session?.uploadTask(with: urlRequest, fromFile: request.bodyFile) else {
            return BackgroundUploadTask(identifier: -1, taskDescription: request.taskDescription)
        }
        task.earliestBeginDate = request.earliestBeginDate
        task.taskDescription = request.taskDescription
        task.resume()
        return BackgroundUploadTask(identifier: task.taskIdentifier, taskDescription: request.taskDescription)
    }

    public func outstandingTasks() async -> [BackgroundUploadTask] {
        guard let session else { return [] }
        return await session.allTasks.filter { $0.state != .completed }.map {
            BackgroundUploadTask(identifier: $0.taskIdentifier, taskDescription: $0.taskDescription ?? "")
        }
    }

    public func cancel(_ task: BackgroundUploadTask) {
        session?.getAllTasks { tasks in
            tasks.first { $0.taskIdentifier == task.identifier && ($0.taskDescription ?? task.taskDescription) == task.taskDescription }?.cancel()
        }
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
        relay.completed(BackgroundUploadCompletion(
            task: BackgroundUploadTask(identifier: task.taskIdentifier, taskDescription: task.taskDescription ?? ""), outcome: outcome))
    }

    public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        relay.didFinishEvents()
    }
}

extension Courier.BackgroundUploads {
    /// Hand-off to the background `URLSession` named `identifier` (`URLSessionBackgroundUploads`).
    public static func urlSession(identifier: String) -> Courier.BackgroundUploads {
        Courier.BackgroundUploads(session: URLSessionBackgroundUploads.shared(identifier: identifier))
    }
}
#endif

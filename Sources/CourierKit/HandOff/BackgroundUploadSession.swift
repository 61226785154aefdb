import Foundation

/// What Courier needs of a background upload session: on Apple platforms a background
/// `URLSession` (`URLSessionBackgroundUploads`), in tests `SimulatedBackgroundSystem` from
/// `CourierTesting`. The system runs the uploads while the app is suspended or not running,
/// and tells the app how each ended when it runs again.
///
/// Courier calls `makeUploadTask` and `cancel` from any thread, never under its own locks.
/// A session delivers every completion exactly once to the handler Courier registers with
/// `deliverCompletions(to:)`; completions that happen before a handler is registered (the app
/// was suspended, or relaunched and has not opened its courier yet) are kept and delivered
/// when it is. A completion whose handler has not returned when the app dies is lost: Courier
/// reconciles at the next open (`BackgroundUploads`).
public protocol BackgroundUploadSession: Sendable {
    /// Creates and starts (resumes) an upload task: POST `request.bodyFile` to `request.url`,
    /// not before `request.earliestBeginDate`. Returns at once.
    func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask
    /// The tasks of this session that have not completed (running or waiting to begin),
    /// across relaunches of the app.
    func outstandingTasks() async -> [BackgroundUploadTask]
    /// Cancels a task; its completion reports `TransportFailure.Kind.cancelled`.
    func cancel(_ task: BackgroundUploadTask)
    /// Cancels a task unless it is sending its request now (the app is back in the foreground
    /// and takes its message back); a task that may have reached the server is left to finish.
    /// The default cancels it whatever it is doing: a duplicate that may cause is dropped by a
    /// server that honours `Idempotency-Key`.
    func cancelUnlessSending(_ task: BackgroundUploadTask)
    /// Registers the one handler of completions. The session awaits each call before it
    /// considers the completion heard (and before it tells the system a batch is handled).
    func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void)
}

extension BackgroundUploadSession {
    public func cancelUnlessSending(_ task: BackgroundUploadTask) { cancel(task) }
}

/// One upload for a background session: the same URL, headers (`Idempotency-Key` included)
/// and body as a foreground attempt of the message, the body in a file, and the networks the
/// app allows (`Configuration.allowsCellularAccess` and its two siblings), which a session
/// must apply to the upload as the foreground transport applies them to every attempt.
public struct BackgroundUploadRequest: Sendable, Hashable {
    /// Where to POST.
    public var url: URL
    /// The message's headers, `Idempotency-Key`, and what `prepareRequest` added at hand-off.
    public var headers: [String: String]
    /// The body, exactly the bytes `send` stored (the file is removed when the message resolves).
    public var bodyFile: URL
    /// The size of `bodyFile`, in bytes.
    public var bodyByteCount: Int
    /// The system must not start the upload before this: the message's backoff.
    public var earliestBeginDate: Date
    /// Identifies the task across relaunches: Courier's message id, attempt and ticket.
    public var taskDescription: String
    /// Whether the upload may go over a cellular network. The default is true.
    public var allowsCellularAccess = true
    /// Whether it may go over a network the system marks expensive (cellular, a personal
    /// hotspot). The default is true.
    public var allowsExpensiveNetworkAccess = true
    /// Whether it may go over a network in Low Data Mode. The default is true.
    public var allowsConstrainedNetworkAccess = true
    /// The message's tags (what `DelayedUploadRefresh` may pick credentials by).
    public var tags: Set<String> = []

    /// A request to upload `bodyFile` (`bodyByteCount` bytes) to `url` no earlier than
    /// `earliestBeginDate`, over any network until told otherwise.
    public init(
        url: URL, headers: [String: String], bodyFile: URL, bodyByteCount: Int, earliestBeginDate: Date,
        taskDescription: String
    ) {
        self.url = url
        self.headers = headers
        self.bodyFile = bodyFile
        self.bodyByteCount = bodyByteCount
        self.earliestBeginDate = earliestBeginDate
        self.taskDescription = taskDescription
    }

    /// A best guess, from above, of the bytes the upload sends: the body, the request line and
    /// these headers, and 512 bytes for the headers the system adds (what iOS asks for in
    /// `URLSessionTask.countOfBytesClientExpectsToSend`, to schedule background transfers).
    public var expectedBytesToSend: Int {
        let headerBytes = headers.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 4 }
        return bodyByteCount + url.absoluteString.utf8.count + headerBytes + 512
    }

    /// A best guess, from above, of the bytes the response brings (what iOS asks for in
    /// `URLSessionTask.countOfBytesClientExpectsToReceive`): a status line, headers and a
    /// short body. Courier reads only the status and `Retry-After`, so a larger body costs the
    /// system's estimate, not delivery. 4 KiB.
    public var expectedBytesToReceive: Int { 4_096 }

    /// Whether the upload may go over a network with these traits (what a session checks
    /// before it starts the upload; `SimulatedBackgroundSystem` does).
    public func mayUse(cellular: Bool, expensive: Bool, constrained: Bool) -> Bool {
        (allowsCellularAccess || !cellular) && (allowsExpensiveNetworkAccess || !expensive)
            && (allowsConstrainedNetworkAccess || !constrained)
    }
}

/// A background upload task as the session knows it.
public struct BackgroundUploadTask: Sendable, Hashable {
    /// The session's identifier of the task (`URLSessionTask.taskIdentifier`).
    public var identifier: Int
    /// What Courier set as its description (`URLSessionTask.taskDescription`).
    public var taskDescription: String

    /// A task known by its identifier and description.
    public init(identifier: Int, taskDescription: String) {
        self.identifier = identifier
        self.taskDescription = taskDescription
    }
}

/// How a background upload ended.
public struct BackgroundUploadCompletion: Sendable, Hashable {
    /// The task that ended.
    public var task: BackgroundUploadTask
    /// The server's answer (status and `Retry-After`), or the failure, classified as a
    /// transport classifies it; `.cancelled` for a cancelled task.
    public var outcome: DeliveryOutcome

    /// The completion of `task` with `outcome`.
    public init(task: BackgroundUploadTask, outcome: DeliveryOutcome) {
        self.task = task
        self.outcome = outcome
    }
}

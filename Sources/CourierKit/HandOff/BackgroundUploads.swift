import Foundation

extension Courier {
    /// Delivery that goes on while the app is suspended or not running: Courier hands pending
    /// messages to a background upload session (`session`), which the system runs on its own
    /// schedule and which wakes or relaunches the app to report how each upload ended. Off
    /// unless `Configuration.backgroundUploads` is set.
    ///
    /// What happens, in order (ARCHITECTURE.md, "Background hand-off"):
    /// - `appDidEnterBackground()` (the app enters the background; and at a background launch)
    ///   takes up to `maximumOutstandingTasks` pending messages, each the head of its ordering
    ///   key, writes each body to a file beside the log, creates an upload task whose
    ///   `earliestBeginDate` is the message's next due time, then logs a `handed-off` record
    ///   with the task's identity. The engine does not attempt a handed-off message.
    /// - Each completion is logged as a foreground attempt's outcome would be (`delivered`, or
    ///   `attempted` with the next due time from the retry policy, `Retry-After` and
    ///   destination backoff). In the background the message is handed off again at once, to
    ///   begin at that due time; in the foreground it goes back to the engine.
    /// - `appDidEnterForeground()` cancels every task that is not sending (iOS may hold a task made
    ///   in the background past its begin date); a task that is sending is left to finish. A
    ///   message comes back to the engine only when its task's completion is heard, so it is
    ///   never in flight twice.
    /// - Opening reconciles the log with the session's outstanding tasks: a task the log does
    ///   not know is adopted; a handed-off message whose task is gone is pending again.
    public struct BackgroundUploads: Sendable {
        /// The session that performs the uploads.
        public var session: any BackgroundUploadSession
        /// At most this many messages are handed off at once. The default is 100: each task is
        /// tracked by the system's transfer daemon and each completion costs the app a log
        /// record during a background wake, so a few hundred tasks stay cheap while thousands
        /// slow the session and the app's wakes; 100 in flight also keeps the body files
        /// beside the log small. Must be at least 1.
        public var maximumOutstandingTasks = 100
        /// Hosts (as in `URL.host`, compared case-insensitively) whose messages are never
        /// handed off: they wait for the app to run, e.g. because every request to them needs
        /// credentials fresher than a hand-off can carry. The default is none.
        public var excludedHosts: Set<String> = []

        /// Hand-off through `session`, with the default bound and no excluded host.
        public init(session: any BackgroundUploadSession) {
            self.session = session
        }

        func isExcluded(_ url: String) -> Bool {
            guard !excludedHosts.isEmpty, let host = URL(string: url)?.host?.lowercased() else { return false }
            return excludedHosts.contains { $0.lowercased() == host }
        }
    }
}

/// A handed-off message: which task carries which attempt (in memory, and in its
/// `handed-off` record).
package struct HandOff: Sendable, Hashable {
    /// The attempt the task makes (1-based, counted with the engine's).
    package var attempt: UInt32
    /// Random, per hand-off: tells this task from earlier ones of the same message.
    package var ticket: UInt64
    /// The session's `taskIdentifier` (its bit pattern).
    package var taskIdentifier: UInt64
    package var earliestBeginMilliseconds: UInt64
    /// When the message was created (wall ms), if this process made the hand-off (not logged:
    /// a replayed or adopted hand-off reads it back). A failed upload is judged by the
    /// message's age (`RetryPolicy.expiry`) without reading the message, so even if it cannot
    /// be read.
    var createdMilliseconds: UInt64?
    /// The message's own expiry (`send(…expiry:)`), known with `createdMilliseconds`.
    var expiryMilliseconds: UInt64?

    package init(
        attempt: UInt32, ticket: UInt64, taskIdentifier: UInt64, earliestBeginMilliseconds: UInt64,
        createdMilliseconds: UInt64? = nil, expiryMilliseconds: UInt64? = nil
    ) {
        self.attempt = attempt
        self.ticket = ticket
        self.taskIdentifier = taskIdentifier
        self.earliestBeginMilliseconds = earliestBeginMilliseconds
        self.createdMilliseconds = createdMilliseconds
        self.expiryMilliseconds = expiryMilliseconds
    }

    /// `value` as 16 lowercase hex digits, zero-padded.
    static func hex(_ value: UInt64) -> String { String(format: "%016llx", value) }

    /// `courier <message id> <attempt> <ticket, 16 hex digits>`: what a task's description says.
    static func taskDescription(_ id: MessageID, attempt: UInt32, ticket: UInt64) -> String {
        "courier \(id) \(attempt) \(hex(ticket))"
    }

    /// The message, attempt and ticket a task description names, or nil if Courier did not write it.
    static func parse(taskDescription: String) -> (id: MessageID, attempt: UInt32, ticket: UInt64)? {
        let parts = taskDescription.split(separator: " ")
        guard parts.count == 4, parts[0] == "courier", let id = MessageID(String(parts[1])),
            let attempt = UInt32(parts[2]), parts[3].count == 16, let ticket = UInt64(parts[3], radix: 16)
        else { return nil }
        return (id, attempt, ticket)
    }

    /// The session's task is not made yet (the hand-off is registered just before).
    static let unknownTask = UInt64.max

    /// The body file of message `id`'s hand-off `ticket`, in `bodies/` beside the log's
    /// segments: one per hand-off, so removing an ended one never touches the next.
    static func bodyFileName(_ id: MessageID, ticket: UInt64) -> String { "\(id)-\(hex(ticket)).body" }

    /// The message and ticket a body file's name says, or nil.
    static func parse(bodyFileName name: String) -> (id: MessageID, ticket: UInt64)? {
        guard name.hasSuffix(".body") else { return nil }
        let stem = name.dropLast(5)
        guard stem.count == 36 + 1 + 16, let id = MessageID(String(stem.prefix(36))), stem.dropFirst(36).first == "-",
            let ticket = UInt64(stem.suffix(16), radix: 16)
        else { return nil }
        return (id, ticket)
    }
    static let directoryName = "bodies"
}

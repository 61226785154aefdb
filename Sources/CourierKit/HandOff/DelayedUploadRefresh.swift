import CourierLog
import Foundation

/// A handed-off upload about to begin, as `refreshHeaders` sees it (iOS: the system calls the
/// session's delegate as a task with a begin date starts, possibly hours after the hand-off).
public struct DelayedUpload: Sendable, Hashable {
    /// The message it carries, if its task is Courier's.
    public var messageID: MessageID?
    public var url: URL
    /// The request's headers as they were made at hand-off (`prepareRequest`'s included).
    public var headers: [String: String]
    /// The message's tags, as `send` was given them (what credentials may be picked by).
    public var tags: Set<String>

    public init(messageID: MessageID?, url: URL, headers: [String: String], tags: Set<String> = []) {
        self.messageID = messageID
        self.url = url
        self.headers = headers
        self.tags = tags
    }
}

/// Fresh headers for a handed-off upload as it begins, the background counterpart of
/// `prepareRequest`: headers only (the body file is already the system's). It runs in the app's
/// process, which the system wakes or relaunches in the background to call it: not on screen,
/// possibly while the device is locked (a keychain item needs an accessibility such as
/// `kSecAttrAccessibleAfterFirstUnlock`), with seconds at most. It returns the headers to set
/// (the others are kept), or nil to leave the request as it is; one that takes longer than
/// `DelayedUploadRefresh.timeLimit` leaves it as it is too. `Idempotency-Key` and
/// `Content-Type` are Courier's and stay.
public typealias DelayedUploadRefresh = @Sendable (DelayedUpload) async -> [String: String]?

/// The platform-neutral half of the refresh (the iOS session only calls these; tested here).
enum HeaderRefresh {
    /// How far ahead, at least, the begin date of a refreshed upload lies: the system asks the
    /// session's delegate to refresh a task only if the task has a begin date (Apple's
    /// `willBeginDelayedRequest`), so with `refreshHeaders` every upload gets one, and fresh
    /// headers however long after its hand-off the system starts it.
    static let minimumDelay: TimeInterval = 1

    /// The begin date to give a task: the request's if it lies ahead, else none (it may start
    /// at once); when the session `refreshes`, `minimumDelay` ahead at least.
    static func beginDate(of request: BackgroundUploadRequest, now: Date, refreshes: Bool) -> Date? {
        if refreshes { return max(request.earliestBeginDate, now.addingTimeInterval(minimumDelay)) }
        return request.earliestBeginDate > now ? request.earliestBeginDate : nil
    }

    /// A task's description: the request's (what Courier knows the task by), then, when the
    /// message has tags, each percent-encoded, comma-separated, for the refresh to see.
    static func describe(_ request: BackgroundUploadRequest) -> String {
        guard !request.tags.isEmpty else { return request.taskDescription }
        let tags = request.tags.sorted().map { $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }
        return request.taskDescription + " " + tags.joined(separator: ",")
    }

    /// A description `describe` made, split: the request's, and the tags.
    static func split(description: String) -> (courier: String, tags: Set<String>) {
        guard HandOff.parse(taskDescription: description) == nil, let space = description.lastIndex(of: " "),
            HandOff.parse(taskDescription: String(description[..<space])) != nil
        else { return (description, []) }
        let tags = description[description.index(after: space)...].split(separator: ",").compactMap {
            String($0).removingPercentEncoding
        }
        return (String(description[..<space]), Set(tags))
    }

    /// What `refreshHeaders` is given for a task described `description`.
    static func delayedUpload(description: String, url: URL, headers: [String: String]) -> DelayedUpload {
        let (courier, tags) = split(description: description)
        return DelayedUpload(
            messageID: HandOff.parse(taskDescription: courier)?.id, url: url, headers: headers, tags: tags)
    }

    /// How long a refresh may take before the upload begins with the headers it has: the
    /// system gives the app a background wake of about 30 s for the whole batch.
    static let timeLimit: Duration = .seconds(5)

    /// `current` with `fresh` set over it, except Courier's own headers (names compared without
    /// case, as HTTP does).
    static func merged(_ current: [String: String], with fresh: [String: String]) -> [String: String] {
        let protected: Set<String> = ["idempotency-key", "content-type"]
        var result = current
        for (name, value) in fresh where !protected.contains(name.lowercased()) {
            // Replace a header of the same name whatever its case.
            for existing in result.keys where existing.lowercased() == name.lowercased() { result[existing] = nil }
            result[name] = value
        }
        return result
    }

    /// Runs `refresh` for `upload`, at most `limit` (measured by `sleep`): the headers to set,
    /// or nil (nothing to change, or too late). Returns at the limit even if `refresh` ignores
    /// cancellation (an auth library's callback, say): the refresh runs in a task of its own,
    /// cancelled then and left to end; whichever comes first answers, once.
    static func run(
        _ refresh: @escaping DelayedUploadRefresh, for upload: DelayedUpload, within limit: Duration = timeLimit,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) async -> [String: String]? {
        await firstOf({ await refresh(upload) }, orAfter: { try? await sleep(limit) }, late: nil, cancellingWork: true)
    }
}

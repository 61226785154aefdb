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

    public init(messageID: MessageID?, url: URL, headers: [String: String]) {
        self.messageID = messageID
        self.url = url
        self.headers = headers
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

/// The platform-neutral half of the refresh (the iOS delegate only calls these; tested here).
enum HeaderRefresh {
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
        let answer = Locked<CheckedContinuation<[String: String]?, Never>?>(nil)
        let answered = Locked(false)
        @Sendable func reply(_ headers: [String: String]?) {
            let continuation = answered.withLock { done -> CheckedContinuation<[String: String]?, Never>? in
                guard !done else { return nil }
                done = true
                return answer.withLock { waiting in
                    defer { waiting = nil }
                    return waiting
                }
            }
            continuation?.resume(returning: headers)
        }
        var work: [Task<Void, Never>] = []
        let headers = await withCheckedContinuation { (continuation: CheckedContinuation<[String: String]?, Never>) in
            answer.withLock { $0 = continuation }
            work = [
                Task { reply(await refresh(upload)) },
                Task {
                    try? await sleep(limit)
                    reply(nil)  // the limit: the request goes as it is
                }
            ]
        }
        for task in work { task.cancel() }
        return headers
    }
}

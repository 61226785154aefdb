import CourierLog
import Foundation

/// Opening before the first unlock (iOS): the platform-neutral half of
/// `open(…, lifecycle: .automatic)`, compiled and tested everywhere. iOS launches apps in the
/// background before the user has unlocked the device once since it restarted (to report
/// background uploads, or to run a background task); the log's files stay locked until then,
/// and opening throws `.protectedDataUnavailable`.
extension Courier {
    /// At most this many opens, each after protected data was said to be available: enough
    /// for a notification that raced an open, not a loop on a refusal that is not data
    /// protection's.
    static let protectedDataOpenLimit = 8

    /// Opens like `open(directory:configuration:)`; while that throws
    /// `.protectedDataUnavailable`, waits for `available` (which returns true once protected
    /// data may have become available, false if the calling task was cancelled) and tries
    /// again. Any other error is thrown at once; so is the last refusal after the limit, or on
    /// cancellation.
    static func open(
        directory: URL, configuration: Configuration,
        waitingForProtectedData available: @escaping @Sendable () async -> Bool
    ) async throws(CourierError) -> Courier {
        var refusal: CourierError?
        for _ in 0..<protectedDataOpenLimit {
            do throws(CourierError) {
                return try await open(directory: directory, configuration: configuration)
            } catch  where error.code == .protectedDataUnavailable {
                refusal = error
                configuration.logger.info(
                    "the log is locked until the device is first unlocked; waiting",
                    metadata: ["courier.directory": "\(directory.path)"])
                guard await available() else { throw error }
            }
        }
        throw refusal ?? CourierError(.protectedDataUnavailable, "protected data never became available")
    }
}

/// A signal fired once that tasks wait for: `wait()` returns true once `fire()` was called
/// (at once if it was already), false if the waiting task is cancelled first.
final class OneShotSignal: Sendable {
    private struct State: WaitedOn {
        /// True once fired.
        var ready: Bool?
        var waiters: [ObjectIdentifier: CheckedContinuation<Bool, Never>] = [:]
    }

    private let state = Locked(State())

    func fire() { state.update(resuming: true) { $0.ready = true } }

    func wait() async -> Bool {
        await state.waitUntilReady(cancelled: false)
    }
}

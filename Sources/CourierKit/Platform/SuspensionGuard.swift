import CourierLog
import Foundation

/// Runs work that takes a file lock in a shared container (an extension's append, the app's
/// claim of an extension's file) so that the process is not suspended while it holds it: iOS
/// kills a process suspended holding a lock in a shared container (`0xdead10cc`). On iOS-family
/// platforms an expiring activity (`ProcessInfo.performExpiringActivity`, which apps and
/// extensions may both call, unlike `UIApplication`'s background tasks, unavailable in an
/// extension); elsewhere the work just runs. The work is short (one append or one claim:
/// milliseconds), so it is never cut short once started.
struct SuspensionGuard: Sendable {
    /// Runs `body` and returns true, or returns false without running it when the system grants
    /// no time (the process is being suspended): the caller takes no lock then.
    let run: @Sendable (_ reason: String, _ body: @escaping @Sendable () -> Void) -> Bool

    /// Work just runs (platforms without suspension, and tests).
    static let none = SuspensionGuard { _, body in
        body()
        return true
    }

    /// This platform's.
    static var platform: SuspensionGuard {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        return SuspensionGuard(run: runUnderExpiringActivity)
        #else
        return none
        #endif
    }

    /// `run(reason, body)` returning what `body` returns or throwing what it throws; throws
    /// `refused` if it could not run. (`do throws` inside, not a typed `Result(catching:)`,
    /// which Swift 5.10's standard library, the iOS 17.4 SDK's, does not have.)
    func run<T: Sendable>(
        _ reason: String, refused: LogError, _ body: @escaping @Sendable () throws(LogError) -> T
    ) throws(LogError) -> T {
        let result = Locked(Result<T, LogError>.failure(refused))
        _ = run(reason) {
            result.withLock { outcome in
                do throws(LogError) { outcome = .success(try body()) } catch { outcome = .failure(error) }
            }
        }
        return try result.withLock { $0 }.get()
    }
}

#if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
extension SuspensionGuard {
    /// The activity's block runs on a system concurrent queue, first with `expired` false (run
    /// the work: the assertion lasts until the block returns), or with true at once if no time
    /// is granted (do not start). When time runs out it is called again, concurrently, with true:
    /// the work under way then finishes. The caller's thread waits for the first call.
    private static func runUnderExpiringActivity(_ reason: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let pending = Locked<(@Sendable () -> Void)?>(body), ran = Locked(false)
        ProcessInfo.processInfo.performExpiringActivity(withReason: reason) { expired in
            guard let work = pending.take() else { return }  // the second call, when time runs out
            if !expired {
                work()
                ran.withLock { $0 = true }
            }
            done.signal()
        }
        done.wait()
        return ran.withLock { $0 }
    }
}
#endif

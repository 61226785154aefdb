import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The courier's lock: an `NSLock` that, in debug builds, also knows which thread holds it, so
/// tests can prove that no user code (clock, `now`, callbacks) runs while it is held.
final class CourierLock {
    private let lock = NSLock()
    #if DEBUG
    /// The holder; written only by the holder, under `lock`.
    private var owner: pthread_t?
    #endif

    /// Runs `body` holding the lock. Typed throws: a non-throwing body needs no `try`, and a
    /// `throws(CourierError)` body keeps its error type (Foundation's `withLock` erases it).
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock.lock()
        #if DEBUG
        owner = pthread_self()
        defer { owner = nil }
        #endif
        defer { lock.unlock() }
        return try body()
    }

    #if DEBUG
    /// Whether the calling thread holds the lock (debug builds only). Reading `owner` without
    /// the lock is a benign race: only the current thread can have set it to itself.
    var isHeldByCurrentThread: Bool {
        guard let owner else { return false }
        return pthread_equal(owner, pthread_self()) != 0
    }
    #endif
}

/// Why `@unchecked Sendable`: `owner` is only written by the thread holding `lock`.
extension CourierLock: @unchecked Sendable {}

/// The latest wall time the engine computed, in ms since 1970, for the log's record
/// timestamps: the log stamps records under its lock, where calling the app's clock is not
/// allowed, so it reads this instead of the clock.
final class WallTimeCache {
    private let lock = NSLock()
    private var value: UInt64

    init(_ milliseconds: UInt64) { value = milliseconds }

    var milliseconds: UInt64 {
        get { lock.withLock { value } }
        set { lock.withLock { value = max(value, newValue) } }
    }
}

/// Why `@unchecked Sendable`: `value` is only touched under `lock`.
extension WallTimeCache: @unchecked Sendable {}

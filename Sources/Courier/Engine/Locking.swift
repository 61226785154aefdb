import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The courier's lock: an `NSLock` that, in debug builds, also knows whether the calling thread
/// holds it, so tests and assertions can prove that no user code (clock, `now`, callbacks)
/// runs while it is held. The holder is recorded in thread-local storage, so asking is free of
/// data races (a shared `owner` field read by other threads was one: ThreadSanitizer said so).
final class CourierLock {
    private let lock = NSLock()

    /// Runs `body` holding the lock. Typed throws: a non-throwing body needs no `try`, and a
    /// `throws(CourierError)` body keeps its error type (Foundation's `withLock` erases it).
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock.lock()
        #if DEBUG
        let previous = pthread_getspecific(heldCourierLockKey)
        pthread_setspecific(heldCourierLockKey, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(heldCourierLockKey, previous) }
        #endif
        defer { lock.unlock() }
        return try body()
    }

    #if DEBUG
    /// Whether the calling thread holds the lock (debug builds only).
    var isHeldByCurrentThread: Bool {
        pthread_getspecific(heldCourierLockKey) == Unmanaged.passUnretained(self).toOpaque()
    }
    #endif
}

#if DEBUG
/// Thread-local: the `CourierLock` the current thread holds, if any.
private let heldCourierLockKey: pthread_key_t = {
    var key = pthread_key_t()
    let created = pthread_key_create(&key, nil)
    precondition(created == 0, "pthread_key_create failed")
    return key
}()
#endif

/// Why `@unchecked Sendable`: its only state is the `NSLock`, which is thread-safe.
extension CourierLock: @unchecked Sendable {}

/// A value guarded by its own lock (as swift-nio's `NIOLockedValueBox`): the one shape behind
/// the small shared boxes of this module, so each is a line, not a class.
final class Locked<Value> {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.withLock { body(&stored) }
    }

    var value: Value {
        get { withLock { $0 } }
        set { withLock { $0 = newValue } }
    }
}

extension Locked {
    /// Removes and returns the value.
    func take<Wrapped>() -> Wrapped? where Value == Wrapped? {
        withLock { value in
            defer { value = nil }
            return value
        }
    }
}

/// Why `@unchecked Sendable`: `stored` is only touched under `lock`; values put in are
/// `Sendable` at every use in this module.
extension Locked: @unchecked Sendable {}

/// The latest wall time the engine computed, in ms since 1970, for the log's record
/// timestamps: the log stamps records under its lock, where calling the app's clock is not
/// allowed, so it reads this instead. It only moves forward.
typealias WallTimeCache = Locked<UInt64>

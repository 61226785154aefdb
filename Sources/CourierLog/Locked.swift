#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by its own lock, in the shape of swift-nio's `NIOLockedValueBox`: the value
/// is reachable only inside `withLock`, so it cannot be touched without the lock by mistake.
/// It is the one small box of this package (every target and tool uses it; `ConditionLock` is
/// the other lock type, for the log's waits). `Sendable` exactly when its value is.
///
/// It also knows whether the calling thread holds it (`isHeldByCurrentThread`), so assertions
/// and tests can prove that no app code (clock, callbacks) runs under a lock. The holders are
/// kept in thread-local storage (a shared `owner` field read by other threads would itself be
/// a data race), in every build: a module's `#if DEBUG` API is missing when a module built
/// in Debug imports it built in Release, and the cost is two thread-local writes per hold.
package final class Locked<Value> {
    @usableFromInline let lock: ConditionLock
    @usableFromInline var stored: Value

    /// A box for `value`. With `forbidsBlockingIO`, no fsync may run while it is held (a
    /// courier's core: every thread that waits for it, an event loop among them, would wait
    /// for the disk too): `BlockingIO.isForbidden` tells, the log asserts it and the file
    /// system double refuses it.
    package init(_ value: Value, forbidsBlockingIO: Bool = false) {
        stored = value
        lock = ConditionLock(forbidsBlockingIO: forbidsBlockingIO)
    }

    /// Runs `body` on the value, holding the lock. Typed throws: a non-throwing body needs no
    /// `try`, and a `throws(SomeError)` body keeps its error type.
    /// Inlinable, so each caller's `T` and `E` are specialized (called across modules
    /// unspecialized, a generic call looks up metadata at run time on every call).
    @inlinable
    package func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        try lock.withLock { () throws(E) -> T in
            // This thread's held locks, innermost first: this one, linked to the one before it
            // for exactly as long as it is held.
            lock.outer = pthread_getspecific(heldLocksKey)
            pthread_setspecific(heldLocksKey, Unmanaged.passUnretained(lock).toOpaque())
            defer { pthread_setspecific(heldLocksKey, lock.outer) }
            return try body(&stored)
        }
    }

    /// A copy of the value (one acquisition). No setter: `x.value += 1` would read and write in
    /// two acquisitions; write with `withLock`.
    @inlinable
    package var value: Value { withLock { $0 } }

    /// Whether the calling thread holds the lock, directly or around another.
    package var isHeldByCurrentThread: Bool { ConditionLock.anyHeld { $0 === lock } }
}

extension Locked {
    /// Takes the value out, leaving nil: whoever takes it first gets it, once.
    package func take<Wrapped>() -> Wrapped? where Value == Wrapped? {
        withLock { value in
            defer { value = nil }
            return value
        }
    }
}

/// Whether the calling thread may block on the disk now: not while it holds a lock made with
/// `forbidsBlockingIO` (a courier's core). The log asserts it before every fsync and file
/// creation; `SimulatedFileSystem` refuses such a call, so a test sees it fail.
package enum BlockingIO {
    /// True while the calling thread holds a lock that forbids blocking file work.
    package static var isForbidden: Bool { ConditionLock.anyHeld(\.forbidsBlockingIO) }
}

/// Thread-local: the `ConditionLock` of the innermost `Locked` the current thread holds, if any.
@usableFromInline
let heldLocksKey: pthread_key_t = {
    var key = pthread_key_t()
    let created = pthread_key_create(&key, nil)
    precondition(created == 0, "pthread_key_create failed")
    return key
}()

/// Why `@unchecked Sendable`: `stored` is only read or written inside `withLock`, holding the
/// lock, and it is `Sendable` itself, so handing it between threads that way is safe.
extension Locked: @unchecked Sendable where Value: Sendable {}

/// A pthread mutex with one condition variable: the log's waits (group commit, appends), and
/// the lock under `Locked`, and the simulated file system's. `Synchronization.Mutex` would
/// do, but needs iOS 18 / macOS 15, and this package supports iOS 16 / macOS 13.
package final class ConditionLock: @unchecked Sendable {
    // Sendable: the pthread objects are only touched through pthread calls, which are
    // thread-safe by contract; the pointers themselves never change after init. `outer` is
    // only read or written by the thread that holds the mutex.
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Whether blocking file work (an fsync, a file's creation) is a bug while this lock is held
    /// (`Locked.init`).
    let forbidsBlockingIO: Bool
    /// While a `Locked` holds it: the lock its thread held before (`heldLocksKey`). Nothing
    /// waits on a `Locked`'s lock (a wait would let another thread take it, and this, meanwhile).
    @usableFromInline var outer: UnsafeMutableRawPointer?

    package init(forbidsBlockingIO: Bool = false) {
        self.forbidsBlockingIO = forbidsBlockingIO
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    @inlinable
    package func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Only while holding the lock (inside `withLock`).
    package func wait() { pthread_cond_wait(condition, mutex) }
    package func broadcast() { pthread_cond_broadcast(condition) }

    /// Whether a lock the calling thread holds through a `Locked` passes `test`.
    static func anyHeld(_ test: (ConditionLock) -> Bool) -> Bool {
        var link = pthread_getspecific(heldLocksKey)
        // Bounded: locks nest a few deep at most; a longer chain is a broken invariant.
        for _ in 0..<64 {
            guard let held = link.map({ Unmanaged<ConditionLock>.fromOpaque($0).takeUnretainedValue() }) else {
                return false
            }
            if test(held) { return true }
            link = held.outer
        }
        preconditionFailure("more than 64 locks held by one thread")
    }
}

/// Milliseconds since 1970 from the system's real-time clock.
func wallClockMilliseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
}

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
    @usableFromInline let lock = ConditionLock()
    @usableFromInline var stored: Value
    /// Whether blocking file work (an fsync, a file's creation) is a bug while this lock is held:
    /// `BlockingIO.isForbidden` tells, the log asserts it and the file system double refuses it.
    @usableFromInline let forbidsBlockingIO: Bool

    /// A box for `value`. With `forbidsBlockingIO`, no fsync may run while it is held (a
    /// courier's core: every thread that waits for it, an event loop among them, would wait
    /// for the disk too).
    package init(_ value: Value, forbidsBlockingIO: Bool = false) {
        stored = value
        self.forbidsBlockingIO = forbidsBlockingIO
    }

    /// Runs `body` on the value, holding the lock. Typed throws: a non-throwing body needs no
    /// `try`, and a `throws(SomeError)` body keeps its error type.
    /// Inlinable, so each caller's `T` and `E` are specialized: called across modules
    /// unspecialized, it looked up `Result<T, E>`'s metadata at run time on every call.
    @inlinable
    package func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        try lock.withLock { () throws(E) -> T in
            // This thread's held locks, innermost first: a frame on the stack, linked to the
            // one before it, that lives exactly as long as the lock is held.
            let previous = pthread_getspecific(heldLocksKey)
            var frame = HeldLock(
                lock: Unmanaged.passUnretained(self).toOpaque(), outer: previous, forbidsBlockingIO: forbidsBlockingIO)
            // A `Result`, not a typed throw through `withUnsafeMutablePointer`: the iOS SDKs
            // before Swift 6 declare it `rethrows`, which loses `E`.
            let result = withUnsafeMutablePointer(to: &frame) { pointer -> Result<T, E> in
                pthread_setspecific(heldLocksKey, pointer)
                defer { pthread_setspecific(heldLocksKey, previous) }
                do throws(E) { return .success(try body(&stored)) } catch { return .failure(error) }
            }
            switch result {
            case .success(let value): return value
            case .failure(let error): throw error
            }
        }
    }

    /// A copy of the value (one acquisition). No setter: `x.value += 1` would read and write in
    /// two acquisitions; write with `withLock`.
    @inlinable
    package var value: Value { withLock { $0 } }

    /// Whether the calling thread holds the lock, directly or around another.
    package var isHeldByCurrentThread: Bool {
        let me = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        return HeldLock.anyHeld { UnsafeRawPointer($0.lock) == me }
    }
}

/// One lock a thread holds, and the one it took before it.
@usableFromInline
struct HeldLock {
    @usableFromInline let lock: UnsafeMutableRawPointer
    @usableFromInline let outer: UnsafeMutableRawPointer?
    @usableFromInline let forbidsBlockingIO: Bool

    @inlinable
    init(lock: UnsafeMutableRawPointer, outer: UnsafeMutableRawPointer?, forbidsBlockingIO: Bool) {
        self.lock = lock
        self.outer = outer
        self.forbidsBlockingIO = forbidsBlockingIO
    }

    /// Whether a lock the calling thread holds passes `test`.
    static func anyHeld(_ test: (HeldLock) -> Bool) -> Bool {
        var frame = pthread_getspecific(heldLocksKey)
        // Bounded: locks nest a few deep at most; a longer chain is a broken invariant.
        for _ in 0..<64 {
            guard let current = frame?.assumingMemoryBound(to: HeldLock.self).pointee else { return false }
            if test(current) { return true }
            frame = current.outer
        }
        preconditionFailure("more than 64 locks held by one thread")
    }
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
    package static var isForbidden: Bool { HeldLock.anyHeld(\.forbidsBlockingIO) }
}

/// Thread-local: the innermost `HeldLock` of the current thread, if any.
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
    // thread-safe by contract; the pointers themselves never change after init.
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
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
}

/// Milliseconds since 1970 from the system's real-time clock.
func wallClockMilliseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
}

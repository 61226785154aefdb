#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex with one condition variable: the log's waits (group commit, appends), and
/// the lock under `Locked`, and the simulated file system's. `Synchronization.Mutex` would
/// do, but needs iOS 18 / macOS 15, and this package supports iOS 16 / macOS 13.
package final class ConditionLock {
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

// The pthread objects are only touched through pthread calls, which are thread-safe by
// contract; the pointers themselves never change after init.
extension ConditionLock: @unchecked Sendable {}

/// Milliseconds since 1970 from the system's real-time clock.
func wallClockMilliseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
}

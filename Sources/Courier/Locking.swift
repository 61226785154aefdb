import Foundation

extension NSLock {
    /// `withLock` with a typed error (Foundation's only rethrows `any Error`).
    func locked<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

#if COURIER_LOCK_PROBE
import CourierLog

/// How long the core's lock is held, for `make lock-hold` only: compiled in with
/// `-Xswiftc -DCOURIER_LOCK_PROBE` (two clock reads and a log query per critical section, which
/// a shipped build must not pay). `CourierCore.write` reports each critical section, and whether
/// the log rolled to a new segment inside it.
@_spi(CourierTesting)
public enum CoreLockProbe {
    /// What the probe saw since the process started.
    public struct Figures: Sendable {
        /// Critical sections, and those in which the log rolled to a new segment.
        public var sections = 0
        public var sectionsWithRoll = 0
        /// The longest hold of the core's lock in a section with a roll, and in any other.
        public var longestWithRoll: Duration = .zero
        public var longestWithoutRoll: Duration = .zero
        /// The holds of sections with a roll, added up (their mean: this / `sectionsWithRoll`).
        public var totalWithRoll: Duration = .zero
        /// Sections without a roll that held the lock over 1 ms.
        public var slowWithoutRoll = 0
    }

    static let figures = Locked(Figures())

    /// The figures so far.
    public static var current: Figures { figures.withLock { $0 } }

    static func record(_ held: Duration, rolled: Bool) {
        figures.withLock { f in
            f.sections += 1
            if rolled {
                f.sectionsWithRoll += 1
                f.longestWithRoll = max(f.longestWithRoll, held)
                f.totalWithRoll += held
            } else {
                f.longestWithoutRoll = max(f.longestWithoutRoll, held)
                if held > .milliseconds(1) { f.slowWithoutRoll += 1 }
            }
        }
    }
}
#endif

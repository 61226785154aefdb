import CourierLog

extension Courier {
    /// What a power loss can lose (`Configuration.durability`). A killed or crashed app never
    /// loses a message `send` returned, whatever this says: the record is in the kernel's page
    /// cache. The article "Durability and what each setting promises" says it record by record.
    public enum Durability: Sendable, Hashable {
        /// Never fsync as records are appended: the system writes them back when it likes
        /// (seconds, typically). A sealed segment and the log's structure are still synced.
        case never
        /// fsync in the background at most this long after an append: a power loss loses at
        /// most the last interval's state changes. One fsync per interval, whatever the rate.
        case interval(Duration)
        /// Every state change is on stable storage before anyone sees it: `send` and `cancel`
        /// return after their fsync (concurrent callers share one), an outcome is synced before
        /// its events, callbacks and `delivered(id)`.
        case always
    }

    /// What opening the log found (`Courier.recovery`): damage that may have cost messages,
    /// and the torn tail a crash leaves, which is the log's end, not damage.
    public struct Recovery: Sendable, Equatable, CustomStringConvertible {
        /// Bytes of a segment that are not a valid record.
        public struct DamagedSpan: Sendable, Hashable, CustomStringConvertible {
            /// The segment's file name.
            public var segment: String
            /// Where the damage starts, in bytes.
            public var offset: Int
            /// How many bytes were skipped.
            public var length: Int
            /// What was wrong, in words for people.
            public var reason: String

            public var description: String { "\(segment) offset \(offset) length \(length): \(reason)" }
        }

        /// The invalid tail cut from the newest segment (a write a crash cut short), if any.
        public var tornTail: DamagedSpan?
        /// Where the cut bytes were saved, for post-mortems.
        public var tornCopyPath: String?
        /// A newest segment that held no valid record and was removed.
        public var removedSegment: String?
        /// Spans that are not valid records, anywhere but a torn tail: each may have cost records.
        public var damaged: [DamagedSpan]
        /// Sequence numbers missing between the records read (lost to damage).
        public var missingSequences: UInt64
        /// Records whose checksums hold but whose bodies could not be read (damage the checksum
        /// cannot see, or a record written by a newer version): skipped, by address.
        public var undecodableRecords: [String]
        /// One line for people: what was lost and where, or "clean".
        public var summary: String

        /// True when nothing was found but a torn tail (which is the end of the log, not damage).
        public var isClean: Bool { damaged.isEmpty && missingSequences == 0 && undecodableRecords.isEmpty }

        public var description: String { summary }

        init(_ report: RecoveryReport) {
            func span(_ s: CourierLog.DamagedSpan) -> DamagedSpan {
                DamagedSpan(segment: s.segment, offset: s.offset, length: s.length, reason: s.reason)
            }
            tornTail = report.tornTail.map(span)
            tornCopyPath = report.tornCopyPath
            removedSegment = report.removedSegment
            damaged = report.damaged.map(span)
            missingSequences = report.missingSequences
            undecodableRecords = report.undecodableRecords.map(\.description)
            summary = report.summary
        }
    }
}

extension WriteAheadLog {
    /// When appended bytes are forced to stable storage. Every policy hands the bytes to the
    /// kernel with `write(2)` before `append` returns, so a killed or crashed *process* loses
    /// nothing; the policies differ only in what a *power loss or kernel panic* can lose.
    public enum SyncPolicy: Sendable, Hashable {
        /// Never fsync records as they are appended; the OS writes them back when it likes
        /// (seconds, typically). A segment is still synced when it is sealed, and structural
        /// changes (new segments, cut tails, deleted segments) are always synced.
        case never
        /// fsync in the background at most this long after an append: a power loss loses at
        /// most the last interval of appends. One fsync per interval, whatever the append rate.
        case interval(Duration)
        /// `append` returns only once its record is on stable storage. Concurrent appenders
        /// share one fdatasync (group commit), so throughput grows with concurrency.
        case always
    }

    /// Where the log does the blocking work of a roll: creating the next segment's file ahead
    /// of time (after the first append to a segment) and syncing a segment it sealed. Either
    /// way the roll itself, under the log's lock, only writes the new segment's header into the
    /// file prepared ahead and renames it into place: no fsync, no file created. A sealed
    /// segment is synced right after, before any later fsync is reported done (so a synced
    /// record never follows a lost one), and its records are durable only from then on.
    public enum SegmentPreparation: Sendable, Hashable {
        /// On the appending thread, once the log's lock is released: deterministic, for a
        /// caller that holds no lock of its own while it appends. An append that rolled
        /// returns once the sealed segment is synced (and throws if that fails).
        case inline
        /// On a serial queue of the log's own: for a caller that appends under a lock of its
        /// own, which must never wait for the disk (a courier's core). Until the next segment
        /// is ready, the active one grows past `segmentSizeBytes`.
        case background
    }

    /// Settings of a log. A `Sendable` value: build it, then hand it to `WriteAheadLog.init`.
    public struct Configuration: Sendable {
        /// The size at which a segment is sealed and a new one started; a record never spans
        /// two segments. The default is 8 MiB: compaction frees space a segment at a time, so
        /// smaller segments return space sooner; and at ~200 bytes per record a segment still
        /// holds ~40,000 records, so rolls are rare. From 4 KiB (`Format.minimumSegmentBytes`)
        /// to 1 GiB (`Format.maximumSegmentBytes`). A segment may grow past it by a record or
        /// so when the next one is not prepared yet (`segmentPreparation`).
        public var segmentSizeBytes: Int = 8 << 20

        /// Where the next segment is prepared, and a sealed one synced. Never under the log's
        /// own lock; the default, `.inline`, does it on the appending thread.
        public var segmentPreparation: SegmentPreparation = .inline

        /// The default is `.interval(.milliseconds(100))`: a phone rarely loses power
        /// abruptly (the battery drains with warning), so a 100 ms window of exposure buys
        /// appends that never wait for the disk.
        public var syncPolicy: SyncPolicy = .interval(.milliseconds(100))

        /// The timestamp stored in each record, in ms since 1970. The default reads the
        /// system clock; tests and fixture generators inject a fixed one.
        public var now: @Sendable () -> UInt64 = { wallClockMilliseconds() }

        /// The random salt of each new segment. The default is the system's random source.
        public var makeSalt: @Sendable () -> UInt32 = { UInt32.random(in: .min ... .max) }

        /// Every setting at its documented default.
        public init() {}

        /// The largest body one record is sure to fit in a segment with its headers, even if
        /// it does not compress (LZ4 then stores 64 KiB blocks raw, 4 bytes of header each),
        /// and never above the format's `Format.maximumBodyBytes`. `append` accepts any body up
        /// to this size; larger ones may still fit when they compress well.
        public var maximumRecordBytes: Int {
            let space = segmentSizeBytes - Format.segmentHeaderSize
            // A body no larger than `space` has at most as many blocks as `space` would.
            let blockHeadersBytes = 4 * ((space + 65_535) / 65_536)
            let body = min(
                Format.maximumBodyBytes, space - Format.recordHeaderSize - Format.bodyFrameOverhead - blockHeadersBytes)
            assert(Format.worstCaseRecordBytes(bodyBytes: body) <= space)
            return max(0, body)
        }

        /// Why these settings cannot make a log, or nil if they can.
        public var problem: String? {
            guard segmentSizeBytes >= Format.minimumSegmentBytes, segmentSizeBytes <= Format.maximumSegmentBytes else {
                return
                    "segmentSizeBytes is \(segmentSizeBytes); it must be from \(Format.minimumSegmentBytes) to "
                    + "\(Format.maximumSegmentBytes)"
            }
            if case .interval(let d) = syncPolicy, d <= .zero {
                return "syncPolicy .interval(\(d)) must be positive"
            }
            return nil
        }
    }
}

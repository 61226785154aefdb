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

    /// Settings of a log. A `Sendable` value: build it, then hand it to `WriteAheadLog.init`.
    public struct Configuration: Sendable {
        /// The size at which a segment is sealed and a new one started; a record never spans
        /// two segments. The default is 8 MiB: a segment is read whole during replay, so this
        /// bounds replay's peak memory on a phone; compaction frees space a segment at a time,
        /// so smaller segments return space sooner; and at ~200 bytes per record a segment
        /// still holds ~40,000 records, so rolls (two fsyncs each) are rare. From 4 KiB
        /// (`Format.minimumSegmentBytes`) to 1 GiB (`Format.maximumSegmentBytes`).
        public var segmentSizeBytes: Int = 8 << 20

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

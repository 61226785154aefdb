/// Reads a log directory without changing it: no lock, no repair. Replay at open and every
/// `wal-dump` command go through here. Safe on a log another process is writing (a record
/// being written shows up as a torn tail of the newest segment).
public struct LogReader: Sendable {
    /// The log directory read.
    public let directory: String
    /// Where its bytes come from.
    public let fileSystem: any LogFileSystem

    /// What counts as a valid record is fixed by the format (`Format.maximumBodyBytes`), not by
    /// a setting here: every reader, and the writer's recovery, agree on it.
    public init(directory: String, fileSystem: any LogFileSystem = PosixFileSystem()) {
        self.directory = directory
        self.fileSystem = fileSystem
    }

    /// The segment file names in log order, and the names of other `.wal` files that do not
    /// follow the naming rule (reported, never read).
    public func segmentNames() throws(LogError) -> (segments: [String], ignored: [String]) {
        let names = try fileSystem.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(Format.segmentSuffix) }
        // Segment names are numbers of one width (`SegmentName`): as strings they sort in log order.
        let segments = names.filter { SegmentName.parse($0) != nil }
        return (segments.sorted(), names.filter { SegmentName.parse($0) == nil }.sorted())
    }

    /// Visits every valid record in sequence order and reports what else was found. Each view's
    /// body lies in a buffer of the reader's, valid only during the visit: `view.record()`
    /// copies one out.
    public func read(_ visit: (RecordView) throws -> Void) throws -> ReplayReport {
        var newest: SegmentScanner.Result?
        return try read(visit, newest: &newest)
    }

    /// `read(_:)`, also handing back the newest segment's scan (the writer's recovery uses it
    /// instead of reading that segment again).
    func read(_ visit: (RecordView) throws -> Void, newest: inout SegmentScanner.Result?) throws -> ReplayReport {
        let (names, ignored) = try segmentNames()
        var report = ReplayReport(ignoredFiles: ignored)
        let decoder = LZ4Decoder()
        var last: UInt64?
        for (index, name) in names.enumerated() {
            let isNewest = index == names.count - 1
            // Before the first record, the oldest segment's name says which sequence comes next.
            var expected = last.map { $0 &+ 1 } ?? SegmentName.parse(name)!
            let result: SegmentScanner.Result
            do {
                result = try scan(name, after: last, decoder: decoder) { record in
                    if record.sequence > expected { report.missingSequences += record.sequence - expected }
                    expected = record.sequence &+ 1
                    last = record.sequence
                    try visit(record)
                }
            } catch let error as LogError where error.errno == 2 {
                // Deleted since the listing, before or while being read: a writer's `forget`
                // dropped it (a running writer deletes nothing else; and a listing taken while
                // files come and go may miss newer segments, so even the last name listed can be
                // a forgotten one). Its records were below the writer's floor: skipping it is
                // what the writer meant.
                report.vanishedSegments.append(name)
                continue
            }
            report.add(result, name: name, isNewest: isNewest)
            if isNewest { newest = result }
        }
        return report
    }

    /// One segment's scan, read through the file system in windows (replay, and the writer's
    /// recovery of the newest segment: the same reads, the same rules).
    func scan(
        _ name: String, after last: UInt64?, decoder: LZ4Decoder = LZ4Decoder(),
        visit: (RecordView) throws -> Void
    ) throws -> SegmentScanner.Result {
        let path = joinPath(directory, name)
        let window = SegmentWindow(size: try fileSystem.fileSize(atPath: path)) { offset, buffer throws(LogError) in
            try fileSystem.openForReading(atPath: path).read(at: offset, into: buffer)
        }
        return try SegmentScanner.scan(window, segment: name, after: last, decoder: decoder, visit: visit)
    }
}

/// What a read found besides the records.
public struct ReplayReport: Sendable, Equatable {
    /// What one segment held.
    public struct Segment: Sendable, Equatable {
        /// Its file name.
        public var name: String
        /// Its size in bytes.
        public var bytes: Int
        /// Valid records read from it.
        public var records: Int
        /// The first valid record's sequence, if any.
        public var firstSequence: UInt64?
        /// The last valid record's sequence, if any.
        public var lastSequence: UInt64?
        /// Why its header was rejected, if it was.
        public var headerProblem: String?
    }

    /// Every segment, in order.
    public var segments: [Segment] = []
    /// Valid records in all.
    public var recordCount = 0
    /// Spans that are not valid records, in any segment but the newest one's torn tail.
    public var damaged: [DamagedSpan] = []
    /// The newest segment's invalid tail: the record being written when the writer stopped.
    /// End of log, not corruption (the writer cuts it away when it next opens).
    public var tornTail: DamagedSpan?
    /// Sequence numbers missing between records that were read (lost to damage).
    public var missingSequences: UInt64 = 0
    /// `.wal` files whose names are not segment names; never read.
    public var ignoredFiles: [String] = []
    /// Segments deleted (by a writer's `forget`) between listing the directory and reading them.
    public var vanishedSegments: [String] = []

    /// True when nothing but a torn tail of the newest segment is wrong. Sequence numbers
    /// missing between the records read do not count here: a live log's compactor removes
    /// segments while a reader reads (`vanishedSegments`). Opening, which excludes writers,
    /// counts them (`RecoveryReport.isClean`).
    public var isClean: Bool { damaged.isEmpty }
    /// The highest sequence number read.
    public var lastSequence: UInt64? { segments.last(where: { $0.lastSequence != nil })?.lastSequence }

    mutating func add(_ result: SegmentScanner.Result, name: String, isNewest: Bool) {
        segments.append(
            Segment(
                name: name, bytes: result.size, records: result.recordCount,
                firstSequence: result.header?.firstSequence, lastSequence: result.lastSequence,
                headerProblem: result.headerProblem))
        recordCount += result.recordCount
        // A damaged header matters unless the whole segment is an unfinished creation: the
        // newest segment, no valid record, and bytes a torn header write can leave.
        let unfinished = isNewest && result.recordCount == 0 && result.damaged.isEmpty && result.tornHeader
        if let problem = result.headerProblem, !unfinished {
            damaged.append(
                DamagedSpan(
                    segment: name, offset: 0, length: min(result.size, Format.segmentHeaderSize), reason: problem))
        } else if let header = result.header, result.headerProblem == nil,
            SegmentName.parse(name) != header.firstSequence
        {
            damaged.append(
                DamagedSpan(
                    segment: name, offset: 0, length: Format.segmentHeaderSize,
                    reason: "first sequence \(header.firstSequence) does not match the file name"))
        }
        damaged += result.damaged
        if let trailing = result.trailing, isNewest {
            tornTail = trailing
        } else if var span = result.trailing {
            span.reason = "invalid tail of a sealed segment (\(span.reason))"
            damaged.append(span)
        }
    }
}

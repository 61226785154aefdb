/// Opening: find the segments, recover the newest, start a fresh one.
struct Opener {
    let directory: String
    let configuration: WriteAheadLog.Configuration
    let fileSystem: any LogFileSystem

    /// Opens; with `visit`, also replays every valid record in the same pass, so the newest
    /// segment is read once, for recovery and replay together.
    mutating func open(replaying visit: ((RecordView) -> Void)?) throws(LogError) -> (
        WriterState, RecoveryReport, ReplayReport?
    ) {
        let reader = LogReader(directory: directory, fileSystem: fileSystem)
        // A spare segment left by the last session: never renamed into place, so nothing in it
        // was ever reported durable (`WriteAheadLog+Append.swift`).
        let spare = joinPath(directory, Format.spareSegmentName)
        if (try? fileSystem.fileSize(atPath: spare)) != nil { try fileSystem.removeFile(atPath: spare) }
        var names = try reader.segmentNames().segments
        var report = RecoveryReport()
        var replay: ReplayReport?
        var newestScan: SegmentScanner.Result?
        if let visit {
            replay = try Self.logError("reading the log") { try reader.read(visit, newest: &newestScan) }
            // A segment vanished while opening: someone else changed the directory we hold.
            names.removeAll { replay!.vanishedSegments.contains($0) }
        }
        var nextSequence: UInt64 = 1
        if let newest = names.last {
            // Not replaying: the same scan of the newest segment alone, so recovery never cuts a
            // record that replay or wal-dump would accept.
            if newestScan == nil {
                newestScan = try Self.logError("reading \(newest)") { try reader.scan(newest, after: nil) { _ in } }
            }
            let recovered = try recoverNewest(newest, scan: newestScan!, report: &report)
            nextSequence = recovered.nextSequence
            if recovered.removed { names.removeLast() }
        }
        var sealed: [SegmentInfo] = []
        for name in names {
            let size = try fileSystem.fileSize(atPath: joinPath(directory, name))
            sealed.append(SegmentInfo(name: name, firstSequence: SegmentName.parse(name)!, sizeBytes: size))
        }
        let active = try createSegment(firstSequence: nextSequence)
        report.activeSegment = active.name
        report.nextSequence = nextSequence
        return (WriterState(active: active, sealed: sealed, nextSequence: nextSequence), report, replay)
    }

    /// `body`'s value; a `LogError` as it is, any other error (the visitors here throw none) as `.io`.
    private static func logError<T>(_ what: String, _ body: () throws -> T) throws(LogError) -> T {
        switch Result(catching: body) {
        case .success(let value): return value
        case .failure(let error as LogError): throw error
        case .failure(let error): throw LogError(.io, "\(what): \(error)")
        }
    }

    /// Cuts an invalid tail off the newest segment, or removes the segment if it holds no valid
    /// record; the bytes cut are saved aside first (none for an empty segment or a bare header).
    /// Returns the next sequence number.
    private func recoverNewest(_ name: String, scan: SegmentScanner.Result, report: inout RecoveryReport)
        throws(LogError) -> (nextSequence: UInt64, removed: Bool)
    {
        let path = joinPath(directory, name)
        // Nothing valid: an unfinished segment creation, or a segment opened and closed with no
        // append. Its name is the next sequence number, which the new segment needs. It is
        // removed; its bytes are saved aside and reported unless it is empty or a bare valid header.
        let removed = scan.recordCount == 0
        let bareHeader = scan.headerProblem == nil && scan.size == Format.segmentHeaderSize
        let whole = DamagedSpan(
            segment: name, offset: 0, length: scan.size,
            reason: scan.trailing?.reason ?? scan.headerProblem ?? "no valid record")
        if let cut = removed ? (scan.size > 0 && !bareHeader ? whole : nil) : scan.trailing {
            report.tornTail = cut
            let bytes = try fileSystem.openForReading(atPath: path).read(at: cut.offset, count: cut.length)
            report.tornCopyPath = try writeAside(bytes, of: path, at: cut.offset)
            if !removed {
                let file = try fileSystem.openFile(atPath: path, create: false)
                try file.truncate(to: cut.offset)
                try file.sync()
            }
        }
        guard removed else { return (scan.lastSequence! + 1, false) }
        try fileSystem.removeFile(atPath: path)
        try fileSystem.syncDirectory(atPath: directory)
        report.removedSegment = name
        return (SegmentName.parse(name)!, true)
    }

    /// Saves the bytes cut from segment `path` at `offset` to `PATH.OFFSET.torn`, durably,
    /// and returns that path. A leftover copy from an interrupted recovery is replaced.
    private func writeAside(_ bytes: [UInt8], of path: String, at offset: Int) throws(LogError) -> String {
        let copy = path + "." + String(offset) + Format.tornSuffix
        try fileSystem.removeFile(atPath: copy)
        let file = try fileSystem.openFile(atPath: copy, create: true)
        try file.writeDurably(bytes, listedIn: directory, fileSystem)
        return copy
    }

    /// Creates a segment file holding just its header, durable with its directory entry.
    private func createSegment(firstSequence: UInt64) throws(LogError) -> ActiveSegment {
        let name = SegmentName.make(firstSequence: firstSequence)
        let path = joinPath(directory, name)
        let salt = configuration.makeSalt()
        let header = SegmentHeader(
            salt: salt, firstSequence: firstSequence, createdMilliseconds: configuration.now())
        let file = try fileSystem.openFile(atPath: path, create: true)
        do {
            // Without the directory's sync the new file's entry may vanish in a crash while its
            // records, and the deletion of older segments, survive: the ALICE paper's classic miss.
            try file.writeDurably(header.encoded(), listedIn: directory, fileSystem)
        } catch {
            try? fileSystem.removeFile(atPath: path)
            throw error
        }
        return ActiveSegment(
            name: name, firstSequence: firstSequence, file: file,
            sizeBytes: Format.segmentHeaderSize, salt: salt)
    }
}

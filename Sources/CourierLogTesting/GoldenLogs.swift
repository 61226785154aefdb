import CourierLog

/// The logs in `Fixtures/logs`, made by today's writer with fixed salts and timestamps, so
/// the bytes are the same on every run. A test regenerates `clean` and compares it with the
/// committed copy: a change to the writer's format cannot slip in unnoticed, and the reader
/// must keep reading the committed copies.
public enum GoldenLogs {
    /// Names and the `wal-dump verify` status each must give.
    public static let expectedVerifyStatus: [String: Int32] = [
        "clean": 0, "torn-tail": 0, "zero-tail": 0, "flipped-byte": 1, "garbage-file": 1, "not-a-log": 1,
        "large-record": 0
    ]

    public static func configuration() -> WriteAheadLog.Configuration {
        var c = WriteAheadLog.Configuration()
        c.segmentSizeBytes = 4096
        c.syncPolicy = .never
        c.now = { 1_763_740_800_000 }  // 2025-11-21T16:00:00Z
        c.makeSalt = { 0xC0FF_EE00 }
        return c
    }

    /// A small log: 48 records of every kind over two segments, the last three a batch.
    public static func writeClean(directory: String, fileSystem: any LogFileSystem) throws {
        let log = try WriteAheadLog(directory: directory, configuration: configuration(), fileSystem: fileSystem)
        let kinds: [RecordKind] = [.enqueued, .attempted, .attempted, .delivered, .abandoned, .snapshot]
        for i in 0..<45 {
            let text = #"{"id":"m\#(i / 3)","event":"\#(kinds[i % kinds.count])","text":"hello number \#(i)"}"#
            try log.append(Array(text.utf8), kind: kinds[i % kinds.count])
        }
        try log.append(
            batch: (45..<48).map { LogEntry(kind: .attempted, body: Array(#"{"id":"m\#($0)","batch":true}"#.utf8)) })
        try log.close()
        try fileSystem.removeFile(atPath: directory + "/" + Format.lockFileName)  // empty; not part of the format
    }

    /// Three records whose bodies (20,000 bytes of JSON each) are five times the 4 KiB segment
    /// size but compress to a few hundred bytes. A reader of any setting accepts them, so
    /// recovery must keep them (an early version cut such a segment away as a "torn tail").
    public static func writeLargeRecords(directory: String, fileSystem: any LogFileSystem) throws {
        let log = try WriteAheadLog(directory: directory, configuration: configuration(), fileSystem: fileSystem)
        for i in 0..<3 {
            var text = #"{"id":"big-\#(i)","text":""#
            text += String(repeating: "abcd", count: (20_000 - text.utf8.count - 2) / 4 + 1).prefix(
                20_000 - text.utf8.count - 2)
            text += #""}"#
            try log.append(Array(text.utf8), kind: .enqueued)
        }
        try log.close()
        try fileSystem.removeFile(atPath: directory + "/" + Format.lockFileName)
    }

    /// Writes every golden log under `root` (one directory each).
    public static func writeAll(root: String, fileSystem: any LogFileSystem) throws {
        try writeLargeRecords(directory: root + "/large-record", fileSystem: fileSystem)
        let clean = root + "/clean"
        try writeClean(directory: clean, fileSystem: fileSystem)
        let (segments, _) = try LogReader(directory: clean, fileSystem: fileSystem).segmentNames()
        let oldest = segments.first!, newest = segments.last!

        func copy(to name: String, change: (String, inout [UInt8]) -> Void) throws {
            let target = root + "/" + name
            try fileSystem.createDirectory(atPath: target)
            for segment in segments {
                let path = clean + "/" + segment
                let size = try fileSystem.fileSize(atPath: path)
                var bytes = try fileSystem.openForReading(atPath: path).read(at: 0, count: size)
                change(segment, &bytes)
                try write(bytes, to: target + "/" + segment, fileSystem)
            }
        }
        // The last record half written.
        try copy(to: "torn-tail") { name, b in if name == newest { b.removeLast(30) } }
        // A sealed segment's third record hit by one flipped bit.
        try copy(to: "flipped-byte") { name, b in if name == oldest { b[40 + 2 * 150] ^= 0x04 } }
        // The file system extended the newest file with zeros that were never written.
        try copy(to: "zero-tail") { name, b in if name == newest { b += [UInt8](repeating: 0, count: 512) } }
        // A segment file full of noise where the oldest segment should be.
        try copy(to: "garbage-file") { _, _ in }
        var noise: UInt64 = 0x9E37_79B9
        let garbage = (0..<700).map { _ -> UInt8 in
            noise = noise &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: noise >> 33)
        }
        try write(garbage, to: root + "/garbage-file/0000000000000000.wal", fileSystem)
        // A directory with no segments at all.
        try fileSystem.createDirectory(atPath: root + "/not-a-log")
        try write(Array("not a log\n".utf8), to: root + "/not-a-log/notes.txt", fileSystem)
    }

    static func write(_ bytes: [UInt8], to path: String, _ fileSystem: any LogFileSystem) throws {
        try? fileSystem.removeFile(atPath: path)
        let file = try fileSystem.openFile(atPath: path, create: true)
        var done = 0
        while done < bytes.count {
            done += try bytes.withUnsafeBytes {
                try file.write(UnsafeRawBufferPointer(rebasing: $0[done...]), at: done)
            }
        }
        try file.sync()
    }
}

import CourierLog
import CourierLogTesting
import Foundation

/// A configuration with fixed time and salts, so runs are reproducible byte for byte.
func testConfiguration(segmentSizeBytes: Int = 16 << 10,
                       policy: WriteAheadLog.SyncPolicy = .never) -> WriteAheadLog.Configuration {
    var c = WriteAheadLog.Configuration()
    c.segmentSizeBytes = segmentSizeBytes
    c.syncPolicy = policy
    c.now = { 1_763_700_000_000 }
    let salts = SaltCounter()
    c.makeSalt = { salts.next() }
    return c
}

final class SaltCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value: UInt32 = 0x5A17_0000
    func next() -> UInt32 { lock.withLock { value += 1; return value } }
}

/// A JSON-ish body of about 150 bytes, distinct per index.
func body(_ i: Int, bytes: Int = 150) -> [UInt8] {
    var s = #"{"id":"msg-\#(i)","to":"https://example.com/inbox","text":"#
    while s.utf8.count < bytes - 2 { s += String(i % 10) }
    return Array((s + "\"}").utf8)
}

let dir = "/log"

/// Opens a log on `fs`, appends `count` records, closes it; returns what was appended.
@discardableResult
func writeLog(_ fs: SimulatedFileSystem, count: Int, segmentSizeBytes: Int = 16 << 10,
              first: Int = 0) throws -> [LogEntry] {
    let log = try WriteAheadLog(directory: dir,
                                configuration: testConfiguration(segmentSizeBytes: segmentSizeBytes), fileSystem: fs)
    var entries: [LogEntry] = []
    for i in first..<(first + count) {
        let e = LogEntry(kind: RecordKind(rawValue: UInt8(1 + i % 5)), body: body(i))
        try log.append(e.body, kind: e.kind)
        entries.append(e)
    }
    try log.close()
    return entries
}

/// Every record a read-only reader finds, with its report.
func readAll(_ fs: any LogFileSystem, _ directory: String = dir) throws -> ([LogRecord], ReplayReport) {
    var records: [LogRecord] = []
    let report = try LogReader(directory: directory, fileSystem: fs).read { records.append($0.record()) }
    return (records, report)
}

/// A copy of `fs`'s files, durably, in a new file system (a fresh "disk" per scenario).
func copyFileSystem(_ fs: SimulatedFileSystem,
                    transform: (String, [UInt8]) -> [UInt8]? = { $1 }) -> SimulatedFileSystem {
    let copy = SimulatedFileSystem()
    try? copy.createDirectory(atPath: dir)
    for path in fs.allPaths() {
        if let bytes = fs.contents(of: path), let changed = transform(path, bytes) {
            copy.setContents(changed, of: path)
        }
    }
    return copy
}

func segmentPaths(_ fs: SimulatedFileSystem) -> [String] {
    fs.allPaths().filter { $0.hasSuffix(".wal") }
}

/// A fresh temporary directory on the real file system, removed by the caller.
func temporaryDirectory() -> String {
    let path = NSTemporaryDirectory() + "courier-test-" + UUID().uuidString
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

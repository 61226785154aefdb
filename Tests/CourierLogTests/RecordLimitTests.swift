import CourierLog
import CourierLogTesting
import Foundation
import Testing

/// One definition of a valid record: the writer, recovery, replay and `wal-dump` agree,
/// whatever settings the reading process uses.
@Suite struct RecordLimitTests {
    /// The loss of issue 7, at the log's level: 300 KB bodies that compress to a few KB fit a
    /// 64 KiB segment; recovery used to scan with a body limit of the segment size, called
    /// them invalid and cut the whole segment away as a "torn tail".
    @Test func recoveryKeepsLargeCompressibleRecordsOfASmallSegment() throws {
        let fs = SimulatedFileSystem()
        let config = testConfiguration(segmentSizeBytes: 65_536)
        let log = try WriteAheadLog(directory: dir, configuration: config, fileSystem: fs)
        let bodies = (0..<5).map { i in
            Array(#"{"i":\#(i),"text":"\#(String(repeating: "abcd", count: 75_000))"}"#.utf8)
        }
        for b in bodies { try log.append(b, kind: .enqueued) }
        fs.killProcess()  // no close(): the app was killed
        _ = log

        let reopened = try WriteAheadLog(directory: dir, configuration: config, fileSystem: fs)
        #expect(reopened.recovery.tornTail == nil, "\(String(describing: reopened.recovery.tornTail))")
        #expect(reopened.recovery.removedSegment == nil)
        var read: [[UInt8]] = []
        let report = try reopened.reader.read { read.append(Array($0.body)) }
        let same = read == bodies  // (not inside #expect: a failure would print megabytes)
        #expect(read.count == bodies.count && same)
        #expect(report.isClean)
        #expect(!fs.allPaths().contains { $0.hasSuffix(Format.tornSuffix) }, "nothing was cut aside")
        try reopened.close()
    }

    /// Whatever segment size the reading process is configured with, it reads the same records.
    @Test func recoveryDoesNotDependOnTheReadersSegmentSize() throws {
        let fs = SimulatedFileSystem()
        let writer = try WriteAheadLog(directory: dir,
                                       configuration: testConfiguration(segmentSizeBytes: 1 << 20), fileSystem: fs)
        let big = [UInt8](repeating: 7, count: 200_000)
        try writer.append(big, kind: .enqueued)
        fs.killProcess()
        _ = writer
        let reader = try WriteAheadLog(directory: dir,
                                       configuration: testConfiguration(segmentSizeBytes: 4096), fileSystem: fs)
        var read: [[UInt8]] = []
        _ = try reader.reader.read { read.append(Array($0.body)) }
        let same = read == [big]
        #expect(same)
        #expect(reader.recovery.tornTail == nil)
        try reader.close()
    }

    /// The writer refuses, before writing a byte, a body no reader would accept.
    @Test func aBodyOverTheFormatLimitIsRefusedBeforeAnythingIsWritten() throws {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir,
                                    configuration: testConfiguration(segmentSizeBytes: Format.maximumSegmentBytes),
                                    fileSystem: fs)
        let writes = fs.count(of: .write)
        let huge = [UInt8](repeating: 0, count: Format.maximumBodyBytes + 1)
        #expect { try log.append(huge, kind: .enqueued) } throws: { ($0 as? LogError)?.code == .recordTooLarge }
        #expect { try log.append(batch: [LogEntry(kind: .enqueued, body: [1]), LogEntry(kind: .enqueued, body: huge)]) }
            throws: { ($0 as? LogError)?.code == .recordTooLarge }
        #expect(fs.count(of: .write) == writes)
        try log.append([1, 2, 3], kind: .enqueued)  // still usable
        try log.close()
    }

    @Test func segmentSizesOutsideTheFormatsBoundsAreRefused() {
        for size in [0, Format.minimumSegmentBytes - 1, Format.maximumSegmentBytes + 1] {
            #expect {
                try WriteAheadLog(directory: dir, configuration: testConfiguration(segmentSizeBytes: size),
                                  fileSystem: SimulatedFileSystem())
            }
                throws: { ($0 as? LogError)?.code == .invalidArgument }
        }
    }

    /// `maximumRecordBytes` is a promise: a body of that size fits, even incompressible, for
    /// every segment size in bounds.
    @Test func theLargestDocumentedBodyFitsEverySegmentSize() throws {
        var rng = SeededRandom(seed: 7)
        for size in [4096, 4097, 65_535, 65_536, 65_577, 131_072, 300_001] {
            var config = testConfiguration(segmentSizeBytes: size)
            config.syncPolicy = .never
            let fs = SimulatedFileSystem()
            let log = try WriteAheadLog(directory: dir, configuration: config, fileSystem: fs)
            let body = (0..<config.maximumRecordBytes).map { _ in UInt8.random(in: 0...255, using: &rng) }
            try log.append(body, kind: .enqueued)
            #expect(Format.worstCaseRecordBytes(bodyBytes: body.count) <= size - Format.segmentHeaderSize,
                    "segment \(size)")
            try log.close()
        }
    }
}

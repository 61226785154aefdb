import Foundation
import Testing

@testable import CourierLog

/// Records read back by address, on a real disk: each segment is opened once and kept open
/// (a few at most), its salt read once.
@Suite struct ReadBackTests {
    @Test func recordsReadBackFromManySegmentsVerifyAndForgottenOnesAreNotFound() throws {
        let directory = NSTemporaryDirectory() + "courier-readback-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = WriteAheadLog.Configuration()
        configuration.segmentSizeBytes = Format.minimumSegmentBytes
        configuration.syncPolicy = .never
        let log = try WriteAheadLog(directory: directory, configuration: configuration)
        var written: [(address: RecordAddress, body: [UInt8])] = []
        for i in 0..<400 {
            let body = Array("record \(i) ".utf8) + (0..<100).map { UInt8(truncatingIfNeeded: $0 &* (i + 1)) }
            written.append((try log.append(body, kind: .enqueued), body))
        }
        #expect(log.segmentNames.count > WriteAheadLog.maximumOpenReaders + 2)
        // Twice, out of order: the second pass reads through the readers and salts kept.
        var random = SplitMix64(seed: 3)
        for pass in 0..<2 {
            for record in written.shuffled(using: &random) {
                #expect(try log.read(record.address).body == record.body, "pass \(pass), \(record.address)")
            }
        }
        let open = log.mutex.withLock { log.state.sealed.filter { $0.reader != nil }.count }
        #expect(open <= WriteAheadLog.maximumOpenReaders)
        #expect(log.mutex.withLock { log.state.sealed.allSatisfy { $0.salt != nil } })
        let forgotten = try log.forget(below: written[200].address.sequence)
        #expect(!forgotten.isEmpty)
        #expect { try log.read(written[0].address) } throws: { ($0 as? LogError)?.code == .notFound }
        #expect(try log.read(written[399].address).body == written[399].body)
        try log.close()
    }
}

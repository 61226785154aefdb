@testable import CourierLog
import CourierLogTesting
import Testing

@Suite struct FormatTests {
    @Test func crc32cMatchesTheStandardCheckValue() {
        // The CRC-32C check value from RFC 3720 / every CRC catalogue.
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
    }

    @Test func crc32cExtendsAcrossSplits() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let whole = CRC32C.checksum(bytes)
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let a = CRC32C.checksum(Array(bytes[..<split]))
            #expect(CRC32C.checksum(Array(bytes[split...]), seed: a) == whole)
        }
    }

    @Test func maskIsReversibleAndChangesTheValue() {
        for v: UInt32 in [0, 1, 0xE306_9283, .max] {
            #expect(CRC32C.unmask(CRC32C.mask(v)) == v)
            #expect(CRC32C.mask(v) != v)
        }
    }

    @Test func segmentNamesSortInLogOrder() {
        #expect(SegmentName.make(firstSequence: 1) == "0000000000000001.wal")
        #expect(SegmentName.parse("0000000000000042.wal") == 42)
        #expect(SegmentName.parse("42.wal") == nil)
        #expect(SegmentName.parse("000000000000004x.wal") == nil)
        #expect(SegmentName.parse("0000000000000042.wal.torn") == nil)
        let names = [1, 9, 10, 100, 12_345].map { SegmentName.make(firstSequence: UInt64($0)) }
        #expect(names.sorted() == names)
    }

    @Test func segmentHeaderIsFortyBytesWithTheDocumentedLayout() {
        let header = SegmentHeader(salt: 0x0102_0304, firstSequence: 7, createdMilliseconds: 0x1122)
        let bytes = header.encoded()
        #expect(bytes.count == 40)
        #expect(Array(bytes[0..<4]) == [0x5E, 0x2A, 0x4D, 0x18])  // skippable frame magic
        #expect(Array(bytes[4..<8]) == [32, 0, 0, 0])
        #expect(Array(bytes[8..<12]) == Array("CWAL".utf8))
        #expect(Array(bytes[16..<20]) == [4, 3, 2, 1])
        #expect(bytes[20] == 7)
    }

    @Test func recordKindsHaveLowerCaseNames() {
        #expect(RecordKind.enqueued.description == "enqueued")
        #expect(RecordKind.attempted.description == "attempted")
        #expect(RecordKind.delivered.description == "delivered")
        #expect(RecordKind(rawValue: 200).description == "kind-200")
        #expect(RecordKind(name: "snapshot") == .snapshot)
    }
}

@Suite struct CRCImplementationTests {
    @Test func hardwareAndSoftwareAgreeOnEveryLengthAndSeed() {
        var rng = SeededRandom(seed: 3)
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &rng) }
        bytes.withUnsafeBytes { raw in
            for length in 0...raw.count {
                for seed: UInt32 in [0, 0xC0FF_EE00, .max] {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[0..<length])
                    #expect(CRC32C.extend(seed, slice) == CRC32C.software(seed, slice), "length \(length)")
                }
            }
        }
    }
}

/// One validator: the scanner and the read by address accept exactly the same records.
@Suite struct RecordHeaderTests {
    /// A log of one record, and that record's bytes with byte `index` of its header set to
    /// `value` and the checksum made right again (so only that field is wrong).
    func forged(index: Int, value: UInt8) throws -> (SimulatedFileSystem, [UInt8], RecordAddress, UInt32) {
        let fs = SimulatedFileSystem()
        let log = try WriteAheadLog(directory: dir, configuration: testConfiguration(), fileSystem: fs)
        let address = try log.append(body(1), kind: RecordKind(rawValue: 1))
        try log.close()
        let path = try #require(fs.allPaths().first { $0.hasSuffix(".wal") })
        var bytes = try #require(fs.contents(of: path))
        let salt = bytes.withUnsafeBytes { $0.loadLE(UInt32.self, at: 16) }
        let start = Int(address.offset), end = start + Int(address.length)
        bytes[start + index] = value
        let crc = bytes[(start + 12)..<end].withUnsafeBytes { CRC32C.mask(CRC32C.extend(salt, $0)) }
        withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange((start + 8)..<(start + 12), with: $0) }
        fs.setContents(bytes, of: path)
        return (fs, Array(bytes[start..<end]), address, salt)
    }

    @Test func aRecordWithItsReservedBytesSetIsRejectedByTheScannerAndByAddressAlike() throws {
        let (fs, record, address, salt) = try forged(index: 34, value: 1)
        #expect(WriteAheadLog.verify(record, address: address, salt: salt, segment: "s") == nil)
        #expect(try readAll(fs).0.isEmpty)
    }

    @Test func anUntouchedRecordIsAcceptedByBoth() throws {
        let (fs, record, address, salt) = try forged(index: 34, value: 0)
        #expect(WriteAheadLog.verify(record, address: address, salt: salt, segment: "s")?.body == body(1))
        #expect(try readAll(fs).0.map(\.body) == [body(1)])
    }
}

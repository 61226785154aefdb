/// One record's bytes (the layout in `Format`): what the log's appends and an outbox file's
/// appends (`OutboxFile`) both write, so every reader checks them the same way.
enum RecordEncoding {
    /// Appends the record of `body` to `scratch` with its CRC left zero (it depends on the salt
    /// of the segment it lands in: `seal`). Returns where the record starts.
    @discardableResult
    static func append(
        _ body: [UInt8], kind: RecordKind, sequence: UInt64, timestampMilliseconds: UInt64, flags: RecordFlags,
        encoder: LZ4Encoder, to scratch: inout [UInt8]
    ) -> Int {
        let start = scratch.count
        scratch.append(contentsOf: zeroHeader)
        let frameLength = body.withUnsafeBytes { encoder.compress($0, appendingTo: &scratch) }
        scratch.storeLE(Format.recordMagic, at: start)
        scratch.storeLE(Format.recordFrameSize, at: start + 4)
        scratch.storeLE(UInt32(frameLength), at: start + 12)
        scratch.storeLE(sequence, at: start + 16)
        scratch.storeLE(timestampMilliseconds, at: start + 24)
        scratch[start + 32] = kind.rawValue
        scratch[start + 33] = flags.rawValue
        return start
    }

    /// Fills in the CRC of each record of `scratch` starting at `starts` (in order), seeded
    /// with `salt`.
    static func seal(_ scratch: inout [UInt8], starts: [Int], salt: UInt32) {
        let total = scratch.count
        scratch.withUnsafeMutableBytes { raw in
            for (i, start) in starts.enumerated() {
                let end = i + 1 < starts.count ? starts[i + 1] : total
                let crc = CRC32C.extend(salt, UnsafeRawBufferPointer(rebasing: raw[(start + 12)..<end]))
                raw.storeBytes(of: CRC32C.mask(crc).littleEndian, toByteOffset: start + 8, as: UInt32.self)
            }
        }
    }

    private static let zeroHeader = [UInt8](repeating: 0, count: Format.recordHeaderSize)
}

import Foundation

/// Identifies one message for its whole life. Its `description` is exactly the value sent in
/// the `Idempotency-Key` header, so a server can drop the duplicates that at-least-once
/// delivery produces.
public struct MessageID: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    /// The UUID behind the id.
    public let uuid: UUID

    /// A new random (version 4) id, unless given a UUID.
    public init(_ uuid: UUID = UUID()) { self.uuid = uuid }

    /// Parses the `description` form (a UUID, any case).
    public init?(_ string: String) {
        guard let uuid = UUID(uuidString: string) else { return nil }
        self.uuid = uuid
    }

    /// Lower-case UUID, e.g. `7c0f3a52-5d7b-4a43-9d2e-2f1b3f5d9a10`.
    public var description: String { uuid.uuidString.lowercased() }

    /// The order of `description`s, compared byte by byte (lower-case hex in fixed places
    /// sorts as the bytes it spells), without making either string.
    public static func < (a: MessageID, b: MessageID) -> Bool {
        withUnsafeBytes(of: a.uuid.uuid) { x in withUnsafeBytes(of: b.uuid.uuid) { y in x.lexicographicallyPrecedes(y) }
        }
    }

    /// Decodes the id from its string form (the `Idempotency-Key`).
    public init(from decoder: any Decoder) throws {
        let string = try decoder.singleValueContainer().decode(String.self)
        guard let id = MessageID(string) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a message id: \(string)"))
        }
        self = id
    }

    /// Encodes the id as its string form (the `Idempotency-Key`).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    /// The 16 raw bytes stored in the log.
    var bytes: [UInt8] { withUnsafeBytes(of: uuid.uuid) { Array($0) } }

    init?(bytes: ArraySlice<UInt8>) {
        guard bytes.count == 16 else { return nil }
        let b = Array(bytes)
        uuid = UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }
}

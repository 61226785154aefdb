/// The one-byte kind of a record. The log stores it opaquely; the codes are part of the
/// on-disk format, so they are fixed here and named for tools such as `wal-dump`.
public struct RecordKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// A message was accepted by `send` (id, destination, headers, body, time).
    public static let enqueued = RecordKind(rawValue: 1)
    /// A delivery attempt finished (id, attempt number, outcome, next due time).
    public static let attempted = RecordKind(rawValue: 2)
    /// The server answered 2xx; the message is done.
    public static let delivered = RecordKind(rawValue: 3)
    /// The retry policy gave up on the message; it is done.
    public static let abandoned = RecordKind(rawValue: 4)
    /// A live message's full state, re-appended by the compactor so old segments can go.
    public static let snapshot = RecordKind(rawValue: 5)
    /// The app withdrew the message (`cancel`); it is done.
    public static let cancelled = RecordKind(rawValue: 6)
    /// The message was handed to a background upload session (its task's identity, the
    /// attempt it makes, its earliest begin time); the next `attempted` or end record closes it.
    public static let handedOff = RecordKind(rawValue: 7)
    /// The app held every message with a tag (`hold(tagged:)`), now and later: no attempt, no
    /// hand-off, until a `released` record for the tag. Concerns no one message.
    public static let held = RecordKind(rawValue: 8)
    /// The app released a tag it held (`release(tagged:)`).
    public static let released = RecordKind(rawValue: 9)

    static let names: [UInt8: String] = [
        1: "enqueued", 2: "attempted", 3: "delivered", 4: "abandoned", 5: "snapshot", 6: "cancelled", 7: "handed-off",
        8: "held", 9: "released"
    ]

    /// Lower-case name (`enqueued`, …); unknown codes print as `kind-N`.
    public var description: String { Self.names[rawValue] ?? "kind-\(rawValue)" }

    /// Looks a kind up by its lower-case name or its number.
    public init?(name: String) {
        guard let code = Self.names.first(where: { $0.value == name })?.key ?? UInt8(name) else { return nil }
        self.init(rawValue: code)
    }
}

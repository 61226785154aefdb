import CourierLog

/// What a layer above the log knows about its own records: the message a record concerns, and
/// a few details worth printing. The log itself stores bodies opaquely; `wal-dump` asks this.
public protocol RecordDescriber: Sendable {
    /// The message id exactly as the messaging layer uses it, or nil if the record has none.
    func messageID(of record: LogRecord) -> String?
    /// Extra `key=value` details for the record (destination, attempt, status, …).
    func details(of record: LogRecord) -> [(key: String, value: String)]
    /// Whether this kind ends a message's life (delivered, abandoned, cancelled).
    func isTerminal(_ kind: RecordKind) -> Bool
}

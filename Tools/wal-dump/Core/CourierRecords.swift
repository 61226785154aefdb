import Courier
import CourierLog

/// Decodes records through the messaging layer's own decoder, so `wal-dump` prints the
/// message id and event details. Records Courier did not write stay opaque.
public struct CourierRecords: RecordDescriber {
    public init() {}
    public func messageID(of record: LogRecord) -> String? { EventDescription(record)?.messageID.description }
    public func details(of record: LogRecord) -> [(key: String, value: String)] {
        EventDescription(record)?.details.map { ($0.key, $0.value) } ?? []
    }
    public func isTerminal(_ kind: RecordKind) -> Bool {
        kind == .delivered || kind == .abandoned || kind == .cancelled
    }
}

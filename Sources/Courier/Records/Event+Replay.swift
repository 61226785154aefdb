import CourierLog

/// What replay needs of one record, read in place from the reader's buffer: no `String`, no
/// array, no body copy per record (decoding whole events measured a third of opening a
/// million messages).
enum ReplayFact {
    case fullState(MessageID, url: UnsafeRawBufferPointer, orderingKey: UnsafeRawBufferPointer?, attempts: UInt32,
                   dueMilliseconds: UInt64)
    case attempted(MessageID, attempt: UInt32, dueMilliseconds: UInt64, retryAfter: Bool)
    case delivered(MessageID)
    case abandoned(MessageID, reason: String)
    case cancelled(MessageID)
}

extension Event {
    /// The facts of a record body, checked exactly as `decode(kind:body:)` checks it: nil
    /// exactly when `decode` returns nil (tested), so replay and `wal-dump` agree on what is
    /// undecodable. `url` points into `body`.
    static func replayFact(kind: RecordKind, body: UnsafeRawBufferPointer) -> ReplayFact? {
        var r = ByteReader(body)
        guard r.u8() == version, let id = r.id() else { return nil }
        let fact: ReplayFact
        switch kind {
        case .enqueued, .snapshot:
            guard let url = r.utf8(), let count = r.u8() else { return nil }
            for _ in 0..<count {
                guard r.utf8() != nil, r.utf8() != nil else { return nil }
            }
            guard r.blobBytes() != nil, r.u64() != nil, let attempts = r.u32(), let due = r.u64() else { return nil }
            var key: UnsafeRawBufferPointer?
            if !r.isAtEnd {
                guard let k = r.utf8() else { return nil }
                key = k
            }
            fact = .fullState(id, url: url, orderingKey: key, attempts: attempts, dueMilliseconds: due)
        case .attempted:
            guard let attempt = r.u32(), let retryAfter = skipOutcome(&r), let due = r.u64() else { return nil }
            fact = .attempted(id, attempt: attempt, dueMilliseconds: due, retryAfter: retryAfter)
        case .delivered:
            guard r.u32() != nil, r.u16() != nil else { return nil }
            fact = .delivered(id)
        case .abandoned:
            guard r.u32() != nil, let reason = r.string() else { return nil }
            fact = .abandoned(id, reason: reason)
        case .cancelled:
            fact = .cancelled(id)
        default:
            return nil
        }
        return r.isAtEnd ? fact : nil
    }

    /// Reads past an outcome, checking it as `decodeOutcome` does: nil if it is malformed, else
    /// whether it carries a `Retry-After` the policy honours (`DeliveryOutcome.carriesRetryAfter`).
    private static func skipOutcome(_ r: inout ByteReader) -> Bool? {
        switch r.u8() {
        case 1:
            guard let status = r.u16(), let header = r.utf8() else { return nil }
            return DeliveryOutcome.honoursRetryAfter(status: Int(status)) && header.count > 0
        case 2:
            guard let raw = r.u8(), TransportFailure.Kind(rawValue: raw) != nil, r.utf8() != nil else { return nil }
            return false
        default: return nil
        }
    }
}

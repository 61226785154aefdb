import CourierLog

/// A message record read in place: the one parser of record bodies (layout in `Event`). Replay
/// reads its facts straight from the reader's buffer, with no `String`, array or body copy per
/// record but a tagged message's tags (decoding whole events was a large share of opening:
/// <doc:MeasuredFigures>);
/// `Event.decode` (attempts reading a message back, `wal-dump`) materializes the same view. So
/// replay, reads and `wal-dump` cannot disagree on what a body says or whether it is valid.
/// Text fields are checked to be UTF-8 here; views (all but the tags) point into the body they came from.
enum EventView {
    /// An `enqueued` or `snapshot` body.
    struct State {
        var id: MessageID
        var url: UnsafeRawBufferPointer
        var headerCount: Int
        /// The header pairs as stored: `headerCount` times `string name · string value`.
        var headers: UnsafeRawBufferPointer
        var body: UnsafeRawBufferPointer
        var createdMilliseconds: UInt64
        var attempts: UInt32
        var dueMilliseconds: UInt64
        var orderingKey: UnsafeRawBufferPointer?
        /// The tags, as strings: replay keeps them, and an untagged message has none to make.
        var tagStrings: [String]
    }

    /// How an attempt ended, as stored.
    enum Outcome {
        case response(status: UInt16, retryAfter: UnsafeRawBufferPointer)
        case failure(TransportFailure.Kind, message: UnsafeRawBufferPointer)

        /// Whether the answer carried a `Retry-After` the policy honours, so the next due time may
        /// be the server's rather than backoff's.
        var carriesRetryAfter: Bool {
            guard case .response(let status, let header) = self else { return false }
            return DeliveryOutcome.honoursRetryAfter(status: Int(status)) && header.count > 0
        }
    }

    case fullState(State)
    case attempted(MessageID, attempt: UInt32, outcome: Outcome, dueMilliseconds: UInt64)
    case delivered(MessageID, attempt: UInt32, status: UInt16)
    case abandoned(MessageID, attempt: UInt32, reason: UnsafeRawBufferPointer)
    case cancelled(MessageID)
    case handedOff(MessageID, HandOff)
    case held(tag: UnsafeRawBufferPointer)
    case released(tag: UnsafeRawBufferPointer)

    /// The view of a body of kind `kind`, or nil if it is not one this version wrote: a wrong
    /// version byte, a field cut short, text that is not UTF-8, an unknown kind or outcome, or
    /// bytes left over.
    static func parse(kind: RecordKind, body: UnsafeRawBufferPointer) -> EventView? {
        var r = ByteReader(body)
        guard r.u8() == Event.version else { return nil }
        if kind == .held || kind == .released {
            guard let tag = r.utf8(), !tag.isEmpty, r.isAtEnd else { return nil }
            return kind == .held ? .held(tag: tag) : .released(tag: tag)
        }
        guard let id = r.id() else { return nil }
        let view: EventView
        switch kind {
        case .enqueued, .snapshot:
            guard let state = parseState(&r, id) else { return nil }
            view = .fullState(state)
        case .attempted:
            guard let attempt = r.u32(), let outcome = parseOutcome(&r), let due = r.u64() else { return nil }
            view = .attempted(id, attempt: attempt, outcome: outcome, dueMilliseconds: due)
        case .delivered:
            guard let attempt = r.u32(), let status = r.u16() else { return nil }
            view = .delivered(id, attempt: attempt, status: status)
        case .abandoned:
            guard let attempt = r.u32(), let reason = r.utf8() else { return nil }
            view = .abandoned(id, attempt: attempt, reason: reason)
        case .cancelled:
            view = .cancelled(id)
        case .handedOff:
            guard let attempt = r.u32(), let ticket = r.u64(), let task = r.u64(), let begin = r.u64() else {
                return nil
            }
            view = .handedOff(
                id, HandOff(attempt: attempt, ticket: ticket, taskIdentifier: task, earliestBeginMilliseconds: begin))
        default:
            return nil
        }
        return r.isAtEnd ? view : nil
    }

    private static func parseState(_ r: inout ByteReader, _ id: MessageID) -> State? {
        // The header pairs (at most 255), then the body, a blob (u32 length, then the bytes), in place.
        guard let url = r.utf8(), let count = r.u8(), let headers = r.strings(2 * Int(count)),
            let n = r.u32(), let body = r.take(Int(n)), let created = r.u64(), let attempts = r.u32(),
            let due = r.u64()
        else { return nil }
        var key: UnsafeRawBufferPointer?
        var tags: [String] = []
        if !r.isAtEnd {
            // An empty key stands for none, and only before tags: one encoding per state.
            guard let k = r.utf8(), !k.isEmpty || !r.isAtEnd else { return nil }
            key = k.isEmpty ? nil : k
        }
        if !r.isAtEnd {
            // Written only when there are tags, each non-empty (an empty key then means none).
            guard let count = r.u8(), count > 0 else { return nil }
            // Bounded by `count`, a u8.
            for _ in 0..<count {
                guard let tag = r.string(), !tag.isEmpty else { return nil }
                tags.append(tag)
            }
        }
        return State(
            id: id, url: url, headerCount: Int(count), headers: headers, body: body, createdMilliseconds: created,
            attempts: attempts, dueMilliseconds: due, orderingKey: key, tagStrings: tags)
    }

    private static func parseOutcome(_ r: inout ByteReader) -> Outcome? {
        switch r.u8() {
        case 1:
            guard let status = r.u16(), let retryAfter = r.utf8() else { return nil }
            return .response(status: status, retryAfter: retryAfter)
        case 2:
            guard let raw = r.u8(), let kind = TransportFailure.Kind(rawValue: raw), let message = r.utf8() else {
                return nil
            }
            return .failure(kind, message: message)
        default:
            return nil
        }
    }
}

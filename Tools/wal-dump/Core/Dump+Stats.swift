import CourierLog

extension Dump {
    /// `wal-dump stats DIR [--json]`: segments, bytes, records per kind, live vs dead
    /// messages, the tags held at the end of the log, damaged spans, torn tail.
    public func stats(json: Bool) -> Status {
        var perKind: [RecordKind: Int] = [:]
        var messages: [String: (records: Int, ended: Bool)] = [:]
        var heldTags: Set<String> = []
        var holders: [String: String] = [:]  // replacement key → the message holding it
        guard
            let report = read({ r in
                perKind[r.kind, default: 0] += 1
                guard let decoded = CourierRecord(r) else { return }
                if let tag = decoded.tag {
                    if r.kind == .held { heldTags.insert(tag) } else { heldTags.remove(tag) }
                }
                guard let id = decoded.messageID else { return }
                messages[id, default: (0, false)].records += 1
                if decoded.isTerminal { messages[id]!.ended = true }
                if let key = decoded.replacing {
                    // As replay does: a full state with a key withdraws the key's earlier holder.
                    if let holder = holders[key], holder != id { messages[holder]?.ended = true }
                    holders[key] = id
                }
            })
        else { return .usage }
        let held = heldTags.sorted()
        let recordsWithID = messages.values.reduce(0) { $0 + $1.records }
        let recordsOfDeadMessages = messages.values.filter(\.ended).reduce(0) { $0 + $1.records }
        let dead = messages.values.filter(\.ended).count
        let live = messages.count - dead
        let bytes = report.segments.reduce(0) { $0 + $1.bytes }
        let kinds = perKind.keys.sorted { $0.rawValue < $1.rawValue }
        if json {
            var j = JSONLine()
            j.add("segments", report.segments.count)
            j.add("bytes", bytes)
            j.add("records", report.recordCount)
            var k = JSONLine()
            for kind in kinds { k.add(kind.description, perKind[kind]!) }
            j.addRaw("records_by_type", k.text)
            if recordsWithID > 0 {
                j.add("live_messages", live)
                j.add("dead_messages", dead)
                j.add("records_of_dead_messages", recordsOfDeadMessages)
            }
            j.addRaw("held_tags", "[" + held.map(JSONLine.quote).joined(separator: ",") + "]")
            j.add("damaged_spans", report.damaged.count)
            j.add("damaged_bytes", report.damaged.reduce(0) { $0 + $1.length })
            j.add("missing_sequences", report.missingSequences)
            j.add("torn_tail_bytes", report.tornTail?.length ?? 0)
            out(j.text)
            return .ok
        }
        out("directory: \(directory)")
        out("segments: \(report.segments.count), \(bytes) bytes")
        for s in report.segments {
            let range = s.lastSequence.map { "seq \(s.firstSequence ?? 0)…\($0)" } ?? "no records"
            out(
                "  \(s.name)  \(s.bytes) bytes  \(s.records) records  \(range)"
                    + (s.headerProblem.map { "  (\($0))" } ?? ""))
        }
        let perRecord = report.recordCount > 0 ? String(bytes / report.recordCount) : "-"
        out("records: \(report.recordCount) (\(perRecord) bytes/record on disk)")
        for kind in kinds { out("  \(kind): \(perKind[kind]!)") }
        if recordsWithID > 0 {
            out("messages: \(live) live, \(dead) dead (\(recordsOfDeadMessages) records of dead messages)")
        } else {
            out("messages: unknown (no record names a message id)")
        }
        out("held tags: " + (held.isEmpty ? "none" : held.joined(separator: ", ")))
        out(
            "damaged spans: \(report.damaged.count)"
                + (report.missingSequences > 0 ? ", \(report.missingSequences) sequence numbers missing" : ""))
        for span in report.damaged { out("  \(span)") }
        out("torn tail: " + (report.tornTail.map { "\($0)" } ?? "none"))
        return .ok
    }
}

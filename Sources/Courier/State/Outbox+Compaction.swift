import CourierLog

/// The compactor's steps that touch the outbox state. The whole protocol, and why a crash
/// between any two steps is harmless, is in `Compactor.swift`.
struct CompactionState {
    /// Messages resolved since the last compaction.
    var resolvedSinceCompaction = 0
    var compacting = false
    /// Segment count when the compactor last looked (it looks again after a roll).
    var segmentsAtLastCheck = 0
    var compactions = 0
}

/// A compaction decided on: forget below `floor` once `pinned` are re-snapshotted above it.
struct CompactionPlan {
    var floor: UInt64
    var pinned: [(id: MessageID, address: RecordAddress)]
}

extension Outbox {
    /// Whether to compact now and what to re-snapshot. Compacts only when dead records
    /// dominate: re-writing the live ones must cost at most half of what deleting the sealed
    /// segments frees. Marks a compaction under way (end it with `endCompaction()`).
    func planCompaction(force: Bool) -> CompactionPlan? {
        mutate { state, _ -> CompactionPlan? in
            guard !state.closed, !state.compaction.compacting else { return nil }
            let segments = log.segmentNames
            guard segments.count >= 2 else { return nil }
            let rolled = segments.count != state.compaction.segmentsAtLastCheck
            guard force || rolled || state.compaction.resolvedSinceCompaction >= limits.compactionThreshold else { return nil }
            state.compaction.segmentsAtLastCheck = segments.count
            guard let floor = SegmentName.parse(segments.last!) else { return nil }
            let pinned = state.projection.pinned(below: floor)
            let pinnedBytes = pinned.reduce(0) { $0 + Int($1.address.length) }
            let sealedBytes = log.sizeBytes - limits.segmentSizeBytes / 2  // the active one is about half full
            guard force || pinnedBytes * 2 <= sealedBytes else { return nil }
            state.compaction.compacting = true
            state.compaction.resolvedSinceCompaction = 0
            return CompactionPlan(floor: floor, pinned: pinned.map { ($0.id, $0.address) })
        }.0
    }

    /// Re-snapshots every pinned message still pending, in chunks: its record is read back
    /// outside the lock, then the snapshot (with the attempt count and due time the projection
    /// holds now) is appended under it, so a later `delivered` can only follow it. Blocking
    /// file work: run it on the I/O queue. Throws if a record cannot be read or the disk is
    /// full: then nothing may be forgotten.
    func writeSnapshots(_ plan: CompactionPlan) throws(LogError) {
        var next = 0
        // Each turn handles at least one message: bounded by the pinned count.
        while next < plan.pinned.count {
            var chunk: [(MessageState, RecordAddress)] = []
            var chunkBytes = 0
            // A batch must fit one segment: a chunk is at most a quarter of one, or a single
            // record (which always fits: `send` checked it against `maximumRecordBytes`).
            let budget = min(limits.segmentSizeBytes / 4, limits.segmentSizeBytes - Format.segmentHeaderSize)
            while next < plan.pinned.count {
                let (id, address) = plan.pinned[next]
                let record = try log.read(address)
                guard let state = Event.decode(kind: record.kind, body: record.body)?.fullState, state.id == id else {
                    throw LogError(.corrupt, "the record at \(address) is not message \(id)'s state")
                }
                let bytes = Format.worstCaseRecordBytes(bodyBytes: record.body.count + 64)
                if !chunk.isEmpty && chunkBytes + bytes > budget { break }  // starts the next chunk
                next += 1
                chunk.append((state, address))
                chunkBytes += bytes
            }
            try appendSnapshots(chunk)
        }
    }

    private func appendSnapshots(_ chunk: [(MessageState, RecordAddress)]) throws(LogError) {
        _ = try mutate { (state, _) throws(LogError) in
            var entries: [LogEntry] = []
            var snapshots: [(id: MessageID, entry: Int)] = []
            for (var message, address) in chunk {
                // Resolved, or moved by an append since the read: nothing to keep.
                guard let slot = state.projection.slot(of: message.id), slot.address == address else { continue }
                message.attempts = slot.attempts
                message.nextDueMilliseconds = slot.dueMilliseconds
                snapshots.append((message.id, entries.count))
                entries.append(LogEntry(kind: .snapshot, body: Event.snapshot(message).encoded()))
                // A recorded hand-off goes along: its record may lie in a segment about to go.
                if let handOff = state.handOffs[message.id], handOff.taskIdentifier != HandOff.unknownTask {
                    entries.append(LogEntry(kind: .handedOff, body: Event.handedOff(message.id, handOff).encoded()))
                }
            }
            guard !entries.isEmpty else { return }
            let addresses = try log.appendRecords(batch: entries)
            for (id, entry) in snapshots { state.projection.moveFullState(id, to: addresses[entry]) }
        }
    }

    func endCompaction(succeeded: Bool) {
        _ = mutate { state, _ in
            state.compaction.compacting = false
            if succeeded {
                state.compaction.compactions += 1
                state.compaction.segmentsAtLastCheck = 0  // the forget changes the count: look again next time
            }
        }
    }

    var compactionCount: Int { read(\.compaction.compactions) }

    /// Tells every subscriber that storage failed.
    func report(_ message: String) -> Effects {
        mutate { _, effects in effects.emit(.storageFailed(message)) }.1
    }
}

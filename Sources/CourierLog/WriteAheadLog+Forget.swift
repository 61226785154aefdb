extension WriteAheadLog {
    /// Deletes every sealed segment whose records all lie below `sequence`, oldest first, and
    /// returns their names. The active segment is never touched, and nothing is rewritten.
    ///
    /// Each deletion is made durable (directory fsync) before the next is issued, so a crash
    /// leaves the surviving segments contiguous: the log can lose a prefix, never a hole.
    /// The deletions and their syncs run outside the log's lock (appends go on meanwhile): a
    /// segment leaves the log's list first, so a read back of one of its records is
    /// `.notFound`, and comes back to the list if its deletion fails (a failed directory fsync
    /// after it fails the log). Concurrent calls take turns, so deletions stay in order.
    @discardableResult
    public func forget(below sequence: UInt64) throws(LogError) -> [String] {
        assert(!BlockingIO.isForbidden, "a directory fsync under a lock that forbids blocking I/O (a courier's core)")
        return try forgetting.withLock { _ throws(LogError) in try forgetInOrder(below: sequence) }
    }

    private func forgetInOrder(below sequence: UInt64) throws(LogError) -> [String] {
        var removed: [String] = []
        // One segment per turn: bounded by the sealed segments, which only rolls add to (at the end).
        while let oldest = try mutex.withLock({ () throws(LogError) -> SegmentInfo? in
            try state.checkOpen()
            guard !state.sealed.isEmpty else { return nil }
            let nextFirst = state.sealed.count > 1 ? state.sealed[1].firstSequence : state.active.firstSequence
            guard nextFirst <= sequence else { return nil }
            return state.sealed.removeFirst()
        }) {
            do {
                try fileSystem.removeFile(atPath: joinPath(directory, oldest.name))
            } catch {
                mutex.withLock { state.sealed.insert(oldest, at: 0) }
                throw error
            }
            do {
                try fileSystem.syncDirectory(atPath: directory)
            } catch {
                fail(error)  // the deletion may or may not be durable: as after any failed fsync
                throw error
            }
            removed.append(oldest.name)
        }
        return removed
    }
}

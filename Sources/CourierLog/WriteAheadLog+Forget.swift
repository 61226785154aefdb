extension WriteAheadLog {
    /// Deletes every sealed segment whose records all lie below `sequence`, oldest first, and
    /// returns their names. The active segment is never touched, and nothing is rewritten.
    ///
    /// Each deletion is made durable (directory fsync) before the next is issued, so a crash
    /// leaves the surviving segments contiguous: the log can lose a prefix, never a hole.
    @discardableResult
    public func forget(below sequence: UInt64) throws(LogError) -> [String] {
        try mutex.withLock { () throws(LogError) -> [String] in
            try state.checkOpen()
            var removed: [String] = []
            // Bounded by the number of sealed segments.
            while let oldest = state.sealed.first {
                let nextFirst = state.sealed.count > 1 ? state.sealed[1].firstSequence : state.active.firstSequence
                guard nextFirst <= sequence else { break }
                try fileSystem.removeFile(atPath: joinPath(directory, oldest.name))
                try fileSystem.syncDirectory(atPath: directory)
                state.sealed.removeFirst()
                removed.append(oldest.name)
            }
            return removed
        }
    }

    /// The first sequence number still held by the oldest segment.
    public var oldestSequence: UInt64 {
        mutex.withLock { state.sealed.first?.firstSequence ?? state.active.firstSequence }
    }
}

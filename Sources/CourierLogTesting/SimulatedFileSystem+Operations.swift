import CourierLog

extension SimulatedFileSystem {
    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return String(path[..<slash])
    }

    static func error(_ errno: Int32, _ what: String, _ path: String) -> LogError {
        LogError(errno == 28 ? .diskFull : .io, what, path: path, errno: errno)
    }

    public func createDirectory(atPath path: String) throws(LogError) {
        lock.withLock {
            var p = path
            // One turn per path component.
            while !p.isEmpty && p != "." && p != "/" {
                directories.insert(p)
                p = Self.parent(p)
            }
        }
    }

    public func contentsOfDirectory(atPath path: String) throws(LogError) -> [String] {
        try lock.withLock { () throws(LogError) -> [String] in
            let prefix = path.hasSuffix("/") ? path : path + "/"
            guard directories.contains(path) || entries.keys.contains(where: { $0.hasPrefix(prefix) }) else {
                throw LogError(.io, "no such directory", path: path, errno: 2)
            }
            // Files and folders, as readdir lists them: a folder is there while it was made and
            // not removed, or while it holds a file (a crash brings back a removed one's files).
            var names: Set<String> = []
            for path in Array(entries.keys) + directories where path.hasPrefix(prefix) {
                if let name = path.dropFirst(prefix.count).split(separator: "/").first { names.insert(String(name)) }
            }
            return Array(names)
        }
    }

    public func readFile(atPath path: String) throws(LogError) -> [UInt8] {
        try lock.withLock { () throws(LogError) -> [UInt8] in
            guard let id = entries[path], let node = nodes[id] else {
                throw LogError(.io, "no such file", path: path, errno: 2)
            }
            return node.bytes
        }
    }

    public func read(atPath path: String, offset: Int, count: Int) throws(LogError) -> [UInt8] {
        try lock.withLock { () throws(LogError) -> [UInt8] in
            if case .error(let e)? = takeFault(.read) { throw Self.error(e, "read failed", path) }
            guard let id = entries[path], let node = nodes[id] else {
                throw LogError(.io, "no such file", path: path, errno: 2)
            }
            let start = min(offset, node.bytes.count)
            return Array(node.bytes[start..<min(node.bytes.count, start + count)])
        }
    }

    public func fileSize(atPath path: String) throws(LogError) -> Int {
        try readFile(atPath: path).count
    }

    /// Reads by path on every read, through `read(atPath:offset:count:)` (its faults included):
    /// no descriptor is kept, so a file removed meanwhile is not found.
    public func openForReading(atPath path: String) throws(LogError) -> any LogReadableFile {
        SimulatedReader(fileSystem: self, path: path)
    }

    public func openFile(atPath path: String, create: Bool) throws(LogError) -> any LogFile {
        let forbidden = create && BlockingIO.isForbidden
        return try lock.withLock { () throws(LogError) -> any LogFile in
            if refuses(forbidden) { throw Self.error(5, "a file created under a lock that forbids it", path) }
            if create {
                if case .error(let e)? = takeFault(.create) { throw Self.error(e, "create failed", path) }
                guard entries[path] == nil else { throw LogError(.io, "file exists", path: path, errno: 17) }
                let id = newNode()
                nodes[id] = Node()
                entries[path] = id
                return SimulatedFile(fileSystem: self, node: id, path: path)
            }
            guard let id = entries[path] else { throw LogError(.io, "no such file", path: path, errno: 2) }
            return SimulatedFile(fileSystem: self, node: id, path: path)
        }
    }

    public func removeFile(atPath path: String) throws(LogError) {
        try lock.withLock { () throws(LogError) in
            if case .error(let e)? = takeFault(.remove) { throw Self.error(e, "remove failed", path) }
            entries[path] = nil
        }
    }

    /// Durable with the next `syncDirectory`: a crash before it brings the old name back.
    public func renameFile(atPath path: String, toPath newPath: String) throws(LogError) {
        try lock.withLock { () throws(LogError) in
            if case .error(let e)? = takeFault(.rename) { throw Self.error(e, "rename failed", path) }
            guard let id = entries.removeValue(forKey: path) else {
                throw LogError(.io, "no such file", path: path, errno: 2)
            }
            entries[newPath] = id
        }
    }

    public func syncDirectory(atPath path: String) throws(LogError) {
        let forbidden = BlockingIO.isForbidden
        try lock.withLock { () throws(LogError) in
            if refuses(forbidden) { throw Self.error(5, "a directory fsync under a lock that forbids it", path) }
            if case .error(let e)? = takeFault(.syncDirectory) { throw Self.error(e, "directory fsync failed", path) }
            let prefix = path.hasSuffix("/") ? path : path + "/"
            let inDirectory: (String) -> Bool = { $0.hasPrefix(prefix) && !$0.dropFirst(prefix.count).contains("/") }
            durableEntries = durableEntries.filter { !inDirectory($0.key) }
            for (p, id) in entries where inDirectory(p) { durableEntries[p] = id }
        }
    }

    public func lockDirectory(atPath path: String) throws(LogError) -> any DirectoryLock {
        try lock.withLock { () throws(LogError) -> any DirectoryLock in
            guard !heldLocks.contains(path) else {
                throw LogError(.locked, "log directory is already open", path: path)
            }
            heldLocks.insert(path)
            return SimulatedLock(fileSystem: self, path: path, generation: lockGeneration)
        }
    }

    public func status(atPath path: String) throws(LogError) -> FileStatus? {
        lock.withLock {
            entries[path].map { FileStatus(device: 1, inode: UInt64($0), sizeBytes: nodes[$0]?.bytes.count ?? 0) }
        }
    }

    public func removeDirectory(atPath path: String) throws(LogError) {
        try lock.withLock { () throws(LogError) in
            let prefix = path.hasSuffix("/") ? path : path + "/"
            guard !entries.keys.contains(where: { $0.hasPrefix(prefix) }) else {
                throw LogError(.io, "directory not empty", path: path, errno: 39)
            }
            directories.remove(path)
        }
    }

    // MARK: File operations (called by SimulatedFile)

    func status(node: Int) -> FileStatus {
        lock.withLock { FileStatus(device: 1, inode: UInt64(node), sizeBytes: nodes[node]?.bytes.count ?? 0) }
    }

    /// `flock` of `holder` (an open file) on `node`. A crash or kill releases every lock: a wait
    /// it ends fails, as the waiting process is gone.
    func lockFile(node: Int, holder: ObjectIdentifier, waiting: Bool, path: String) throws(LogError) -> Bool {
        try lock.withLock { () throws(LogError) -> Bool in
            let generation = lockGeneration
            // Bounded by the holder, which unlocks or closes its file (or a crash ends it).
            while let owner = fileLocks[node], owner != holder {
                guard waiting else { return false }
                lock.wait()
                if lockGeneration != generation { throw Self.error(5, "the process ended while it waited", path) }
            }
            fileLocks[node] = holder
            return true
        }
    }

    func unlockFile(node: Int, holder: ObjectIdentifier) {
        lock.withLock {
            guard fileLocks[node] == holder else { return }
            fileLocks[node] = nil
            lock.broadcast()
        }
    }

    func write(node: Int, path: String, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(LogError) -> Int {
        try lock.withLock { () throws(LogError) -> Int in
            var count = bytes.count
            switch takeFault(.write) {
            case .error(let e)?: throw Self.error(e, "write failed", path)
            case .shortWrite(let n)?: count = min(count, max(0, n))
            case nil: break
            }
            var node_ = nodes[node]!
            if let capacity {
                let used = nodes.values.reduce(0) { $0 + $1.bytes.count } - node_.bytes.count
                let room = capacity - used - offset
                if room < count {
                    guard room > 0 else { throw Self.error(28, "no space left on device", path) }
                    count = room
                }
            }
            if node_.bytes.count < offset { node_.bytes += [UInt8](repeating: 0, count: offset - node_.bytes.count) }
            let end = offset + count
            if node_.bytes.count < end { node_.bytes += [UInt8](repeating: 0, count: end - node_.bytes.count) }
            node_.bytes.replaceSubrange(offset..<end, with: bytes.prefix(count))
            nodes[node] = node_
            return count
        }
    }

    func sync(node: Int, path: String) throws(LogError) {
        let forbidden = BlockingIO.isForbidden
        try lock.withLock { () throws(LogError) in
            if refuses(forbidden) { throw Self.error(5, "an fsync under a lock that forbids it", path) }
            // Bounded by the test: it resumes what it paused, or cuts power (`crash()`), which
            // ends the process whose fsync this was.
            let generation = lockGeneration
            while syncsPaused {
                syncsWaiting += 1
                lock.wait()
                syncsWaiting -= 1
            }
            if lockGeneration != generation { throw Self.error(5, "the power was cut during this fsync", path) }
            if case .error(let e)? = takeFault(.sync) { throw Self.error(e, "fsync failed", path) }
            if var n = nodes[node] {
                n.durableBytes = n.bytes
                nodes[node] = n
            }
        }
    }

    func truncate(node: Int, path: String, to size: Int) throws(LogError) {
        try lock.withLock { () throws(LogError) in
            if case .error(let e)? = takeFault(.truncate) { throw Self.error(e, "truncate failed", path) }
            if var n = nodes[node] {
                n.bytes = Array(n.bytes.prefix(size)) + [UInt8](repeating: 0, count: max(0, size - n.bytes.count))
                nodes[node] = n
            }
        }
    }

    /// Releases `path`, unless a crash or kill since the lock was taken already released it
    /// (the new holder's lock must survive a stale holder's release).
    func unlock(_ path: String, generation: Int) {
        lock.withLock { if generation == lockGeneration { _ = heldLocks.remove(path) } }
    }
}

final class SimulatedFile: LogFile {
    let fileSystem: SimulatedFileSystem
    let node: Int
    let path: String

    init(fileSystem: SimulatedFileSystem, node: Int, path: String) {
        self.fileSystem = fileSystem
        self.node = node
        self.path = path
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(LogError) -> Int {
        try fileSystem.write(node: node, path: path, bytes, at: offset)
    }
    func sync() throws(LogError) { try fileSystem.sync(node: node, path: path) }
    func truncate(to size: Int) throws(LogError) { try fileSystem.truncate(node: node, path: path, to: size) }
    func status() throws(LogError) -> FileStatus { fileSystem.status(node: node) }
    func lock(waiting: Bool) throws(LogError) -> Bool {
        try fileSystem.lockFile(node: node, holder: ObjectIdentifier(self), waiting: waiting, path: path)
    }
    func unlock() { fileSystem.unlockFile(node: node, holder: ObjectIdentifier(self)) }
    deinit { unlock() }  // closing a file releases its lock
}

final class SimulatedReader: LogReadableFile {
    let fileSystem: SimulatedFileSystem
    let path: String

    init(fileSystem: SimulatedFileSystem, path: String) {
        self.fileSystem = fileSystem
        self.path = path
    }

    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(LogError) -> Int {
        let bytes = try fileSystem.read(atPath: path, offset: offset, count: buffer.count)
        buffer.copyBytes(from: bytes)
        return bytes.count
    }
}

final class SimulatedLock: DirectoryLock {
    let fileSystem: SimulatedFileSystem
    let path: String
    let generation: Int
    private let released = Locked(false)

    init(fileSystem: SimulatedFileSystem, path: String, generation: Int) {
        self.fileSystem = fileSystem
        self.path = path
        self.generation = generation
    }

    func unlock() {
        let first = released.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        if first { fileSystem.unlock(path, generation: generation) }
    }
}

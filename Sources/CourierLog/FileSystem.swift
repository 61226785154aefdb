#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The file operations the log needs, and nothing more, so tests can inject faults (short
/// writes, ENOSPC, EIO, crashes that lose unsynced bytes). `PosixFileSystem` is the real one;
/// `CourierLogTesting.SimulatedFileSystem` is the fault-injecting double.
///
/// Paths are plain strings; the log only ever joins a directory path with a file name.
public protocol LogFileSystem: Sendable {
    /// Creates the directory and any missing parents; no error if it exists.
    func createDirectory(atPath path: String) throws(LogError)
    /// Names (not paths) of the entries of a directory.
    func contentsOfDirectory(atPath path: String) throws(LogError) -> [String]
    /// Opens a file for writing at explicit offsets, creating it (empty) if `create` is true.
    func openFile(atPath path: String, create: Bool) throws(LogError) -> any LogFile
    /// Removes the file at `path` (a directory fsync makes it durable).
    func removeFile(atPath path: String) throws(LogError)
    /// Gives the file at `path` the name `newPath` in the same directory, replacing any file
    /// there, atomically (`rename(2)`; a directory fsync makes it durable). The log moves the
    /// segment it prepared ahead into place with it, so that a roll creates no file.
    func renameFile(atPath path: String, toPath newPath: String) throws(LogError)
    /// Makes the directory's entries (created and removed files) durable.
    func syncDirectory(atPath path: String) throws(LogError)
    /// Takes an exclusive advisory lock on the directory for the life of the returned object;
    /// throws `.locked` if another holder (any process, or this one) has it.
    func lockDirectory(atPath path: String) throws(LogError) -> any DirectoryLock
    /// Opens the file at `path` for positioned reads, the log's one way to read a file: one
    /// record read back (the log keeps one open per segment it reads records back from), a
    /// segment read in windows, a torn tail saved aside.
    func openForReading(atPath path: String) throws(LogError) -> any LogReadableFile
    /// What `stat` says of the file at `path`; nil if there is none (`fileSize(atPath:)` throws).
    func status(atPath path: String) throws(LogError) -> FileStatus?
    /// Removes the empty directory at `path`; no error if there is none.
    func removeDirectory(atPath path: String) throws(LogError)
}

/// Which file a file is, and its size: a rename keeps its identity, a new file at the same path
/// has another. A shared outbox's writer checks with it that a collection has not claimed its
/// file between its open and its lock.
public struct FileStatus: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var sizeBytes: Int

    public init(device: UInt64, inode: UInt64, sizeBytes: Int) {
        self.device = device
        self.inode = inode
        self.sizeBytes = sizeBytes
    }

    /// What `stat` says.
    init(_ st: stat) { self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), sizeBytes: Int(st.st_size)) }

    /// Whether `other` is the same file, whatever the sizes.
    public func isSameFile(as other: FileStatus) -> Bool { device == other.device && inode == other.inode }
}

/// A file open for positioned reads.
public protocol LogReadableFile: AnyObject, Sendable {
    /// Reads up to `buffer.count` bytes at `offset`; returns how many (fewer only at the end).
    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(LogError) -> Int
}

extension LogReadableFile {
    /// Up to `count` bytes at `offset`, in a new array (shorter only at the end of the file).
    package func read(at offset: Int, count: Int) throws(LogError) -> [UInt8] {
        var failure: LogError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = 0
            do throws(LogError) {
                initialized = try read(at: offset, into: UnsafeMutableRawBufferPointer(buffer))
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return bytes
    }
}

extension LogFileSystem {
    /// The size of the file at `path`, in bytes: `status(atPath:)`'s, or the error `stat` gives
    /// when there is no file (ENOENT: a reader takes it for a segment forgotten meanwhile).
    package func fileSize(atPath path: String) throws(LogError) -> Int {
        guard let found = try status(atPath: path) else {
            throw LogError(.io, "cannot stat file: " + String(cString: strerror(ENOENT)), path: path, errno: ENOENT)
        }
        return found.sizeBytes
    }
}

/// An open file. Closed when the last reference goes away.
public protocol LogFile: AnyObject, Sendable {
    /// Writes some prefix of `bytes` at `offset` and returns its length (which may be short).
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(LogError) -> Int
    /// fdatasync (F_FULLFSYNC on Darwin).
    func sync() throws(LogError)
    /// Cuts the file to `size` bytes.
    func truncate(to size: Int) throws(LogError)
    /// What `fstat` says of this open file.
    func status() throws(LogError) -> FileStatus
    /// Takes the exclusive advisory lock of this open file (`flock`: another open of the same
    /// file, in this process or another, conflicts), until `unlock()` or the file closes.
    /// Waits for it if `waiting`; else returns false at once if another holds it.
    func lock(waiting: Bool) throws(LogError) -> Bool
    /// Releases the lock `lock(waiting:)` took.
    func unlock()
}

/// An exclusive lock on a log directory, held while a log is open (released on `unlock()` or
/// when the object goes away).
public protocol DirectoryLock: AnyObject, Sendable {
    /// Releases the directory lock.
    func unlock()
}

extension LogFile {
    /// Writes all of `bytes`, looping over short writes. Every turn writes at least one byte or
    /// throws, so the loop runs at most `bytes.count` times.
    func writeFully(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(LogError) {
        var done = 0
        while done < bytes.count {
            let n = try write(UnsafeRawBufferPointer(rebasing: bytes[done...]), at: offset + done)
            guard n > 0 else { throw LogError(.io, "write made no progress", errno: 5) }
            done += n
        }
    }

    /// `writeFully` for an array. The typed error leaves `withUnsafeBytes` through a variable
    /// (`do throws(LogError)`, not `Result`): this compiles the same against Swift 6's standard
    /// library and Swift 5.10's (the iOS 17.4 SDK's, which `make ios-check` uses), whose
    /// `withUnsafeBytes` and `Result` know only untyped errors.
    package func writeFully(_ bytes: [UInt8], at offset: Int) throws(LogError) {
        var failure: LogError?
        bytes.withUnsafeBytes { raw in
            do throws(LogError) { try writeFully(raw, at: offset) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Writes `bytes` at the start of the file, syncs it, then syncs `directory` (the file's entry
    /// there) through `fileSystem`: a file written whole, durable with its name.
    func writeDurably(_ bytes: [UInt8], listedIn directory: String, _ fileSystem: any LogFileSystem) throws(LogError) {
        try writeFully(bytes, at: 0)
        try sync()
        try fileSystem.syncDirectory(atPath: directory)
    }
}

func joinPath(_ directory: String, _ name: String) -> String {
    directory.hasSuffix("/") ? directory + name : directory + "/" + name
}

/// The real file system, through POSIX calls (no Foundation on the write path).
///
/// Logs can hold personal data, so what it creates is private to the user: directories
/// `0700`, files `0600` (before the umask, which can only remove bits). A log directory that
/// already exists with wider permissions is narrowed to `0700` when it is opened.
public struct PosixFileSystem: LogFileSystem {
    /// The real file system.
    public init() {}

    /// Permissions of the directories and files the log creates.
    public static let directoryMode: mode_t = 0o700
    /// Mode of every file created: owner read and write only.
    public static let fileMode: mode_t = 0o600

    public func createDirectory(atPath path: String) throws(LogError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        // One mkdir per path component: bounded by the component count.
        for component in path.split(separator: "/") {
            prefix += component + "/"
            if mkdir(prefix, Self.directoryMode) != 0 && errno != EEXIST {
                throw Self.error("cannot create directory", prefix)
            }
        }
        var st = stat()
        guard stat(path, &st) == 0 else { throw Self.error("cannot stat directory", path) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw LogError(.notADirectory, "not a directory", path: path)
        }
        // An existing directory (made by the app, or by an older version) is narrowed too.
        if st.st_mode & 0o077 != 0, chmod(path, Self.directoryMode) != 0 {
            throw Self.error("cannot restrict the permissions of the log directory", path)
        }
    }

    public func contentsOfDirectory(atPath path: String) throws(LogError) -> [String] {
        guard let dir = opendir(path) else {
            if errno == ENOTDIR { throw LogError(.notADirectory, "not a directory", path: path) }
            throw Self.error("cannot list directory", path)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// One descriptor, kept until the reader is released: a record read back costs one `pread`.
    public func openForReading(atPath path: String) throws(LogError) -> any LogReadableFile {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Self.error("cannot open file", path) }
        return PosixFile(fd: fd, path: path)
    }

    public func openFile(atPath path: String, create: Bool) throws(LogError) -> any LogFile {
        let flags = O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0)
        let fd = open(path, flags, Self.fileMode)
        guard fd >= 0 else { throw Self.error("cannot open file for writing", path) }
        return PosixFile(fd: fd, path: path)
    }

    /// Removes the file at `path`.
    public func removeFile(atPath path: String) throws(LogError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw Self.error("cannot remove file", path) }
    }

    public func renameFile(atPath path: String, toPath newPath: String) throws(LogError) {
        guard rename(path, newPath) == 0 else { throw Self.error("cannot rename file to " + newPath, path) }
    }

    public func syncDirectory(atPath path: String) throws(LogError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Self.error("cannot open directory", path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw Self.error("cannot fsync directory", path) }
    }

    public func lockDirectory(atPath path: String) throws(LogError) -> any DirectoryLock {
        let lockPath = joinPath(path, Format.lockFileName)
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, Self.fileMode)
        guard fd >= 0 else { throw Self.error("cannot open lock file", lockPath) }
        // flock locks belong to the open file description, so a second open of the same
        // directory in this very process conflicts too (fcntl locks would not).
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let e = errno
            close(fd)
            if e == EWOULDBLOCK {
                throw LogError(.locked, "log directory is already open (in this or another process)", path: path)
            }
            throw LogError(.io, "cannot lock log directory", path: path, errno: e)
        }
        return PosixFile(fd: fd, path: lockPath)  // `unlock()`, and closing, release the flock
    }

    public func status(atPath path: String) throws(LogError) -> FileStatus? {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if errno == ENOENT { return nil }
            throw Self.error("cannot stat file", path)
        }
        return FileStatus(st)
    }

    public func removeDirectory(atPath path: String) throws(LogError) {
        guard rmdir(path) == 0 || errno == ENOENT else { throw Self.error("cannot remove directory", path) }
    }

    static func error(_ what: String, _ path: String) -> LogError {
        let e = errno
        let code: LogError.Code = (e == ENOSPC || e == EDQUOT) ? .diskFull : .io
        return LogError(code, what + ": " + String(cString: strerror(e)), path: path, errno: e)
    }
}

/// An open segment file, for writing or for positioned reads. Closes in `deinit`, so a sync
/// or read in flight on another thread keeps it open even after the writer rolled to the next
/// segment or forgot this one.
final class PosixFile: LogFile, LogReadableFile, DirectoryLock {
    let fd: Int32
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(LogError) -> Int {
        while true {
            let n = pwrite(fd, bytes.baseAddress, bytes.count, off_t(offset))
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw PosixFileSystem.error("write failed", path)
        }
    }

    func sync() throws(LogError) {
        #if canImport(Darwin)
        // fsync on Darwin only reaches the drive's cache; F_FULLFSYNC asks it to flush. A file
        // system without it (SMB, some external volumes: ENOTSUP) gets fsync, as SQLite does.
        var rc = fcntl(fd, F_FULLFSYNC)
        if rc != 0 && (errno == ENOTSUP || errno == ENOTTY || errno == EINVAL) { rc = fsync(fd) }
        #else
        let rc = fdatasync(fd)
        #endif
        guard rc == 0 else { throw PosixFileSystem.error("fsync failed", path) }
    }

    func truncate(to size: Int) throws(LogError) {
        guard ftruncate(fd, off_t(size)) == 0 else { throw PosixFileSystem.error("truncate failed", path) }
    }

    func status() throws(LogError) -> FileStatus {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw PosixFileSystem.error("cannot stat file", path) }
        return FileStatus(st)
    }

    func lock(waiting: Bool) throws(LogError) -> Bool {
        // Bounded: an interrupted wait is retried at most 100 times.
        for _ in 0..<100 {
            if flock(fd, waiting ? LOCK_EX : LOCK_EX | LOCK_NB) == 0 { return true }
            if errno == EWOULDBLOCK && !waiting { return false }
            if errno != EINTR { break }
        }
        throw PosixFileSystem.error("cannot lock file", path)
    }

    func unlock() { flock(fd, LOCK_UN) }

    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(LogError) -> Int {
        precondition(offset >= 0)
        var done = 0
        // Each turn reads at least one byte or stops: bounded by the buffer's size.
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                throw PosixFileSystem.error("cannot read file", path)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }
}

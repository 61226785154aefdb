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
    /// The whole file (recovery reads a torn tail's bytes with it; segments are read in windows).
    func readFile(atPath path: String) throws(LogError) -> [UInt8]
    /// The size of the file at `path`, in bytes.
    func fileSize(atPath path: String) throws(LogError) -> Int
    /// Up to `count` bytes from `offset` (fewer at the end of the file): a positioned read, for
    /// reading one record back, or a segment in windows, without reading the whole file.
    func read(atPath path: String, offset: Int, count: Int) throws(LogError) -> [UInt8]
    /// The same, into `buffer` (no array made or zero-filled): returns the bytes read, fewer
    /// than `buffer.count` only at the end of the file. Has a default built on the above.
    func read(atPath path: String, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(LogError) -> Int
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
    /// Opens the file at `path` for positioned reads: the log keeps one open per segment it
    /// reads records back from. The default reads through `read(atPath:offset:into:)` on every
    /// call (so a file system that does not implement it keeps working).
    func openForReading(atPath path: String) throws(LogError) -> any LogReadableFile
    /// What `stat` says of the file at `path`; nil if there is none.
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
    func read(at offset: Int, count: Int) throws(LogError) -> [UInt8] {
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
    public func openForReading(atPath path: String) throws(LogError) -> any LogReadableFile {
        PathReader(fileSystem: self, path: path)
    }

    public func read(atPath path: String, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(LogError)
        -> Int
    {
        let bytes = try read(atPath: path, offset: offset, count: buffer.count)
        if !bytes.isEmpty {
            bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        return bytes.count
    }
}

/// Reads through the file system by path, opening the file on each read (the default).
final class PathReader: LogReadableFile {
    let fileSystem: any LogFileSystem
    let path: String

    init(fileSystem: any LogFileSystem, path: String) {
        self.fileSystem = fileSystem
        self.path = path
    }

    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(LogError) -> Int {
        try fileSystem.read(atPath: path, offset: offset, into: buffer)
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
    func writeFully(_ bytes: [UInt8], at offset: Int) throws(LogError) {
        var failure: LogError?
        bytes.withUnsafeBytes { raw in
            do throws(LogError) { try writeFully(raw, at: offset) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}

func joinPath(_ directory: String, _ name: String) -> String {
    directory.hasSuffix("/") ? directory + name : directory + "/" + name
}

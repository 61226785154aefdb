/// Errors thrown by the log. Callers switch on `code`; the message is for people.
///
///     do { try log.append(body, kind: .enqueued) }
///     catch let error as LogError where error.code == .diskFull { … }
public struct LogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for `catch` clauses and `switch`.
    public enum Code: Int, Sendable, Hashable {
        /// An I/O call failed; `errno` says which. The log is now failed (see `.failed`).
        case io = 1
        /// The disk is full (ENOSPC/EDQUOT). The partial write was rolled back; the log stays
        /// open and readable, and appends may succeed once space is freed.
        case diskFull = 2
        /// Another `WriteAheadLog`, in this process or another, holds the directory.
        case locked = 3
        /// An earlier write or fsync failed. Nothing more is appended until the log is reopened:
        /// after a failed fsync the kernel may have dropped dirty pages, so retrying the fsync
        /// could report success for data that is gone (the PostgreSQL "fsyncgate" lesson).
        case failed = 4
        /// The log was closed.
        case closed = 5
        /// A record or batch is larger than a segment can hold.
        case recordTooLarge = 6
        /// The path is not a usable log directory (not a directory, unreadable).
        case notADirectory = 7
        /// An argument is out of range (documented on the method).
        case invalidArgument = 8
        /// A record read back by address lies in a segment that was forgotten (compacted away)
        /// since the address was taken. Nothing is wrong: look the address up again.
        case notFound = 9
        /// Bytes read back by address are not the record expected there (a checksum, size or
        /// sequence mismatch): damage on disk.
        case corrupt = 10
    }

    /// What went wrong.
    public var code: Code
    /// Why, in words for people.
    public var message: String
    /// The file concerned, if any.
    public var path: String?
    /// The system error number, if a system call failed.
    public var errno: Int32?

    /// An error with these fields.
    public init(_ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
    }

    public var description: String {
        var s = "\(message)"
        if let path { s += " (\(path))" }
        if let errno { s += " [errno \(errno)]" }
        return s
    }
}

// What an app would do instead of Courier, measured in the same run: one SQLite row per
// transaction (WAL, synchronous=NORMAL: what a hand-rolled outbox on GRDB or SQLite.swift does),
// and the floor, a bare write(2) of a record of the same size.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// SQLite through the system library, loaded at run time (no headers needed to build).
struct SQLiteBaseline {
    typealias Open = @convention(c) (UnsafePointer<CChar>, UnsafeMutablePointer<OpaquePointer?>) -> Int32
    typealias Exec =
        @convention(c) (OpaquePointer?, UnsafePointer<CChar>, OpaquePointer?, OpaquePointer?, OpaquePointer?) -> Int32
    typealias Prepare =
        @convention(c) (
            OpaquePointer?, UnsafePointer<CChar>, Int32, UnsafeMutablePointer<OpaquePointer?>, OpaquePointer?
        ) -> Int32
    typealias BindBlob = @convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?, Int32, Int) -> Int32
    typealias BindInt = @convention(c) (OpaquePointer?, Int32, Int64) -> Int32
    typealias Step = @convention(c) (OpaquePointer?) -> Int32
    typealias Reset = @convention(c) (OpaquePointer?) -> Int32
    typealias Finalize = @convention(c) (OpaquePointer?) -> Int32
    typealias Close = @convention(c) (OpaquePointer?) -> Int32

    let open: Open, exec: Exec, prepare: Prepare, bindBlob: BindBlob, bindInt: BindInt
    let step: Step, reset: Reset, finalize: Finalize, close: Close

    init?() {
        guard let lib = dlopen("libsqlite3.so.0", RTLD_NOW) ?? dlopen("libsqlite3.dylib", RTLD_NOW) else { return nil }
        func symbol<T>(_ name: String, _: T.Type) -> T? { dlsym(lib, name).map { unsafeBitCast($0, to: T.self) } }
        guard let open = symbol("sqlite3_open", Open.self), let exec = symbol("sqlite3_exec", Exec.self),
            let prepare = symbol("sqlite3_prepare_v2", Prepare.self),
            let bindBlob = symbol("sqlite3_bind_blob", BindBlob.self),
            let bindInt = symbol("sqlite3_bind_int64", BindInt.self), let step = symbol("sqlite3_step", Step.self),
            let reset = symbol("sqlite3_reset", Reset.self), let finalize = symbol("sqlite3_finalize", Finalize.self),
            let close = symbol("sqlite3_close", Close.self)
        else { return nil }
        (self.open, self.exec, self.prepare, self.bindBlob, self.bindInt) = (open, exec, prepare, bindBlob, bindInt)
        (self.step, self.reset, self.finalize, self.close) = (step, reset, finalize, close)
    }

    /// Inserts `count` rows, one per transaction; `row(i)` makes each row's id and body (inside
    /// the timing: an app's own work per message counts). Returns seconds.
    func insertEachInItsOwnTransaction(count: Int, path: String, row: (Int) -> (id: [UInt8], body: [UInt8])) -> Double {
        var db: OpaquePointer?
        precondition(open(path, &db) == 0)
        defer { _ = close(db) }
        precondition(exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", nil, nil, nil) == 0)
        precondition(
            exec(
                db,
                "CREATE TABLE outbox(seq INTEGER PRIMARY KEY, id BLOB, url BLOB, body BLOB, created INTEGER, attempts "
                    + "INTEGER, due INTEGER)",
                nil, nil, nil) == 0)
        var statement: OpaquePointer?
        precondition(
            prepare(
                db, "INSERT INTO outbox(id, url, body, created, attempts, due) VALUES (?, ?, ?, ?, 0, ?)", -1,
                &statement, nil) == 0)
        defer { _ = finalize(statement) }
        let url = Array("https://example.com/inbox".utf8)
        let transient = -1  // SQLITE_TRANSIENT: SQLite copies the bytes
        let start = ContinuousClock.now
        for i in 0..<count {
            let (id, body) = row(i)
            _ = exec(db, "BEGIN", nil, nil, nil)
            _ = id.withUnsafeBytes { bindBlob(statement, 1, $0.baseAddress, Int32($0.count), transient) }
            _ = url.withUnsafeBytes { bindBlob(statement, 2, $0.baseAddress, Int32($0.count), transient) }
            _ = body.withUnsafeBytes { bindBlob(statement, 3, $0.baseAddress, Int32($0.count), transient) }
            _ = bindInt(statement, 4, 1_700_000_000_000)
            _ = bindInt(statement, 5, 1_700_000_000_000)
            precondition(step(statement) == 101)  // SQLITE_DONE
            _ = reset(statement)
            _ = exec(db, "COMMIT", nil, nil, nil)
        }
        return seconds(start.duration(to: .now))
    }
}

/// The floor: `count` appends of `recordBytes` bytes with write(2), nothing else. Seconds.
func bareWrites(count: Int, recordBytes: Int, path: String) -> Double {
    let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
    precondition(fd >= 0)
    defer { Glibc.close(fd) }
    let record = [UInt8](repeating: 0x41, count: recordBytes)
    let start = ContinuousClock.now
    for _ in 0..<count { _ = record.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
    return seconds(start.duration(to: .now))
}

import CourierKit
import CourierLog

/// The three `wal-dump` commands as functions that write lines to `out` (stdout) and `err`
/// (stderr) and return the exit status. Read-only: they never lock, truncate or repair.
public struct Dump {
    public var directory: String
    public var fileSystem: any LogFileSystem
    public var out: (String) -> Void
    public var err: (String) -> Void

    public init(
        directory: String, fileSystem: any LogFileSystem = PosixFileSystem(),
        out: @escaping (String) -> Void, err: @escaping (String) -> Void
    ) {
        self.directory = directory
        self.fileSystem = fileSystem
        self.out = out
        self.err = err
    }

    /// Exit statuses, shared by every command.
    public enum Status: Int32 { case ok = 0, damaged = 1, usage = 2 }

    /// `wal-dump records DIR [--json] [--payload]`: one line per record.
    public func records(json: Bool, payload: Bool) -> Status {
        guard
            let report = read({ record in
                out(json ? jsonLine(record, payload: payload) : textLine(record, payload: payload))
            })
        else { return .usage }
        for span in report.damaged { err("damaged: \(span)") }
        if let torn = report.tornTail { err("torn tail (end of log): \(torn)") }
        return .ok
    }

    /// `wal-dump verify DIR`: 0 if clean or only the newest segment's tail is torn, 1 with
    /// each damaged span named otherwise.
    public func verify() -> Status {
        guard let report = read({ _ in }) else { return .usage }
        if report.segments.isEmpty {
            out("not a log: no segment files (*.wal) in \(directory)")
            return .damaged
        }
        for name in report.ignoredFiles { out("ignored: \(name) (not a segment name)") }
        for span in report.damaged { out("damaged: \(span)") }
        if report.missingSequences > 0 { out("missing: \(report.missingSequences) sequence numbers") }
        var summary = "\(report.recordCount) records in \(report.segments.count) segments"
        if let torn = report.tornTail {
            summary += "; torn tail at \(torn.segment) offset \(torn.offset) (\(torn.length) bytes, end of log)"
        }
        if report.isClean {
            out("ok: " + summary)
            return .ok
        }
        out("damaged: " + summary)
        return .damaged
    }

    /// Reads the log, or explains on `err` why it cannot (nil).
    func read(_ visit: (LogRecord) -> Void) -> ReplayReport? {
        do {
            return try LogReader(directory: directory, fileSystem: fileSystem).read { visit($0.record()) }
        } catch {
            err("wal-dump: \(directory): \(error)")
            return nil
        }
    }

    func textLine(_ r: LogRecord, payload: Bool) -> String {
        var s =
            "\(r.segment) offset=\(r.address.offset) length=\(r.address.length) seq=\(r.sequence) "
            + "type=\(r.kind) time=\(iso8601(milliseconds: r.timestampMilliseconds))"
        if let decoded = CourierRecord(r) {
            if let id = decoded.messageID { s += " id=\(id)" }
            for (k, v) in decoded.details { s += " \(k)=\(v)" }
        }
        s += " body=\(r.body.count)B"
        if payload { s += " payload=" + payloadText(r.body).json }
        return s
    }

    func jsonLine(_ r: LogRecord, payload: Bool) -> String {
        var j = JSONLine()
        j.add("segment", r.segment)
        j.add("offset", Int(r.address.offset))
        j.add("length", Int(r.address.length))
        j.add("seq", r.sequence)
        j.add("type", r.kind.description)
        j.add("kind", Int(r.kind.rawValue))
        j.add("timestamp", iso8601(milliseconds: r.timestampMilliseconds))
        j.add("timestamp_ms", r.timestampMilliseconds)
        j.add("batch_end", r.flags.contains(.batchEnd))
        if let decoded = CourierRecord(r) {
            if let id = decoded.messageID { j.add("id", id) }
            for (k, v) in decoded.details { j.add(k, v) }
        }
        j.add("body_bytes", r.body.count)
        if payload {
            let p = payloadText(r.body)
            j.addRaw(p.isText ? "payload" : "payload_base64", p.json)
        }
        return j.text
    }

    /// The body as a JSON string: its text if it is UTF-8, else base64.
    func payloadText(_ body: [UInt8]) -> (json: String, isText: Bool) {
        if isWellFormedUTF8(body) { return (JSONLine.quote(String(decoding: body, as: UTF8.self)), true) }
        return (JSONLine.quote(base64(body)), false)
    }
}

func base64(_ bytes: [UInt8]) -> String {
    let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    var out = ""
    var i = 0
    while i < bytes.count {
        let n = min(3, bytes.count - i)
        var v = UInt32(bytes[i]) << 16
        if n > 1 { v |= UInt32(bytes[i + 1]) << 8 }
        if n > 2 { v |= UInt32(bytes[i + 2]) }
        for k in 0..<4 { out.append(k <= n ? table[Int((v >> (18 - 6 * k)) & 63)] : "=") }
        i += 3
    }
    return out
}

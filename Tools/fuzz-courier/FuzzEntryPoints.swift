import CourierKit
import CourierLog
import Foundation

/// The properties this libFuzzer target checks, on input it makes up, through the record format
/// and the JSON writer's `package` API (nothing of it ships in a product). Each traps on a
/// violation, which is what libFuzzer reports.
enum FuzzEntryPoints {
    /// Any bytes, as the body of a record of any kind: decoding returns nil or an event that
    /// re-encodes to bytes decoding to the same event (replay reads the same parser's view).
    static func decodeEvent(kind rawKind: UInt8, body: UnsafeRawBufferPointer) {
        let kind = RecordKind(rawValue: rawKind % 12)  // the kinds in use (1-9), and a few unknown ones
        guard let event = Event.decode(kind: kind, body: body) else { return }
        let again = event.encoded()
        precondition(Event.decode(kind: kind, body: again) == event, "a decoded \(kind) event does not round-trip")
    }

    /// Bytes read as a program that builds a nested value (strings that may hold any scalar,
    /// integers, doubles and floats from any bit pattern including NaN and infinities, dates,
    /// nesting as deep as the input allows), then written by `send`'s JSON writer: it returns
    /// bytes Foundation parses, or throws `.invalidJSON`; it never traps or overflows the stack.
    static func serializeJSON(program: UnsafeRawBufferPointer) {
        var builder = JSONProgram(bytes: program)
        let object = builder.object()
        switch Result(catching: { () throws(CourierError) in try JSONBody.serialize(object) }) {
        case .success(let bytes):
            precondition(
                (try? JSONSerialization.jsonObject(with: Data(bytes))) != nil, "wrote JSON Foundation cannot parse")
        case .failure(let error):
            precondition(error.code == .invalidJSON, "a refused value gave \(error.code)")
        }
    }
}

/// Turns fuzzer bytes into a `[String: Any]`. Each step consumes at least one byte, so the
/// work is bounded by the input's size. Containers nest as deep as the input asks, up to
/// four times the writer's limit (deeper, this builder itself would be the one recursing).
private struct JSONProgram {
    let bytes: UnsafeRawBufferPointer
    var at = 0
    var depth = 0
    static let maximumDepth = 4 * JSONWriter.maximumDepth

    mutating func byte() -> UInt8? {
        guard at < bytes.count else { return nil }
        defer { at += 1 }
        return bytes[at]
    }

    mutating func word() -> UInt64 {
        var w: UInt64 = 0
        for _ in 0..<8 { w = w << 8 | UInt64(byte() ?? 0) }
        return w
    }

    mutating func string() -> String {
        let count = Int(byte() ?? 0) % 24
        var scalars = String.UnicodeScalarView()
        for _ in 0..<count {
            let raw = UInt32(byte() ?? 0) << 8 | UInt32(byte() ?? 0)
            scalars.append(Unicode.Scalar(raw) ?? "\u{FFFD}")  // surrogates are not scalars
        }
        return String(scalars)
    }

    mutating func object() -> [String: Any] {
        var d: [String: Any] = [:]
        while let op = byte(), op != 0xFF { d[string()] = value(op) }
        return d
    }

    mutating func array() -> [Any] {
        var a: [Any] = []
        while let op = byte(), op != 0xFF { a.append(value(op)) }
        return a
    }

    mutating func value(_ op: UInt8) -> Any {
        switch op % 10 {
        case 0: return string()
        case 1: return Int(truncatingIfNeeded: word())
        case 2: return Double(bitPattern: word())
        case 3: return (byte() ?? 0) & 1 == 1
        case 4: return NSNull()
        case 5, 6:
            guard depth < Self.maximumDepth else { return string() }
            depth += 1
            defer { depth -= 1 }
            return op % 10 == 5 ? array() as Any : object() as Any
        case 7: return Date(timeIntervalSince1970: Double(byte() ?? 0))
        case 8: return NSNumber(value: Double(bitPattern: word()))
        default: return Float(bitPattern: UInt32(truncatingIfNeeded: word()))
        }
    }
}

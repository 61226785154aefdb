import Foundation

/// Turns `send`'s values into the exact bytes that will be POSTed, or throws `.invalidJSON`
/// naming the offending path. `JSONSerialization` traps on values it cannot represent, so
/// every value is checked before it is reached.
package enum JSONBody {
    /// Validates and writes in one pass. Foundation's `JSONSerialization` is never called: it
    /// traps on values it cannot represent, and on Linux it spent most of `send`'s time
    /// (<doc:MeasuredFigures>); this writer checks each value as it writes it.
    package static func serialize(_ object: [String: Any]) throws(CourierError) -> [UInt8] {
        var writer = JSONWriter()
        writer.bytes.reserveCapacity(256)
        do {
            try writer.write(object, depth: 0)
        } catch {
            throw CourierError(.invalidJSON, "$" + error.message)
        }
        return writer.bytes
    }

    static func encode(_ value: some Encodable, with encoder: JSONEncoder? = nil) throws(CourierError) -> [UInt8] {
        let encoder = encoder ?? defaultEncoder()
        do {
            return Array(try encoder.encode(value))
        } catch {
            // JSONEncoder throws (does not trap) on NaN and infinity.
            throw CourierError(.invalidJSON, "cannot encode \(type(of: value)) as JSON: \(error)")
        }
    }

    /// Sorted keys, `/` not escaped: what `send` uses without an encoder of the app's.
    static func defaultEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// RFC 8259 JSON from `[String: Any]`, keys sorted by their UTF-8 bytes, `/` not escaped.
package struct JSONWriter {
    var bytes: [UInt8] = []

    /// Nesting deeper than this is refused (a cycle through NSArray/NSDictionary would
    /// otherwise recurse forever).
    package static let maximumDepth = 100

    mutating func write(_ value: Any, depth: Int) throws(CourierError) {
        guard depth <= Self.maximumDepth else {
            throw CourierError(.invalidJSON, ": nested deeper than \(Self.maximumDepth) levels")
        }
        // Fast path: the exact Swift types of literals, matched by type identity (a chain of
        // `as?` casts on `Any`, bridging included, cost more than writing the value).
        switch ObjectIdentifier(type(of: value)) {
        case ObjectIdentifier(String.self): return string(value as! String)
        case ObjectIdentifier(Int.self): bytes += String(value as! Int).utf8; return
        case ObjectIdentifier(Bool.self): bytes += (value as! Bool) ? Array("true".utf8) : Array("false".utf8); return
        case ObjectIdentifier(Double.self): return try double(value as! Double)
        case ObjectIdentifier([String: Any].self): return try object(value as! [String: Any], depth: depth)
        case ObjectIdentifier([Any].self): return try array(value as! [Any], depth: depth)
        default: break
        }
        // A real NSNumber (from JSONSerialization, Objective-C, …). A metatype test: casting
        // `as NSNumber` would first bridge every dictionary and array to Foundation, a large
        // share of `send` (figures: MeasuredFigures.md).
        if type(of: value) is NSNumber.Type { return try number(value as! NSNumber) }
        switch value {
        case let s as String: string(s)
        case let b as Bool: bytes += b ? Array("true".utf8) : Array("false".utf8)
        case let n as Int: bytes += Array(String(n).utf8)
        case let n as Int8: bytes += Array(String(n).utf8)
        case let n as Int16: bytes += Array(String(n).utf8)
        case let n as Int32: bytes += Array(String(n).utf8)
        case let n as Int64: bytes += Array(String(n).utf8)
        case let n as UInt: bytes += Array(String(n).utf8)
        case let n as UInt8: bytes += Array(String(n).utf8)
        case let n as UInt16: bytes += Array(String(n).utf8)
        case let n as UInt32: bytes += Array(String(n).utf8)
        case let n as UInt64: bytes += Array(String(n).utf8)
        case let n as Double: try double(n)
        case let n as Float: try double(Double(n))
        case is NSNull: bytes += Array("null".utf8)
        case let d as [String: Any]: try object(d, depth: depth)
        case let a as [Any]: try array(a, depth: depth)
        case is Date:
            throw CourierError(.invalidJSON, ": a Date has no JSON form; send a string (ISO 8601) or a number")
        case is Data:
            throw CourierError(.invalidJSON, ": Data has no JSON form; send a base64 string")
        default:
            throw CourierError(.invalidJSON, ": a value of type \(type(of: value)) has no JSON form")
        }
    }

    // Paths in error messages are built while an error unwinds (a message starts `: …` at the
    // value refused, each level prefixes its key or index, `serialize` the `$`), never on the
    // way down: a path string per value showed in `send`'s profile.

    private mutating func object(_ d: [String: Any], depth: Int) throws(CourierError) {
        bytes.append(UInt8(ascii: "{"))
        var pairs = Array(d)
        if pairs.count > 1 { pairs.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) } }
        for (i, pair) in pairs.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            string(pair.key)
            bytes.append(UInt8(ascii: ":"))
            do {
                try write(pair.value, depth: depth + 1)
            } catch {
                throw CourierError(.invalidJSON, "." + pair.key + error.message)
            }
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func array(_ a: [Any], depth: Int) throws(CourierError) {
        bytes.append(UInt8(ascii: "["))
        for (i, v) in a.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            do {
                try write(v, depth: depth + 1)
            } catch {
                throw CourierError(.invalidJSON, "[\(i)]" + error.message)
            }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    private mutating func double(_ n: Double) throws(CourierError) {
        guard n.isFinite else { throw CourierError(.invalidJSON, ": \(n) is not a JSON number") }
        // Swift prints the shortest form that reads back exactly: 0.1, 1e-05, 1e+20 are JSON.
        if n == n.rounded(), abs(n) < 1e15 { bytes += String(Int64(n)).utf8 } else { bytes += Array("\(n)".utf8) }
    }

    /// An NSNumber from Objective-C or Foundation: its stored type says bool, float or integer.
    private mutating func number(_ n: NSNumber) throws(CourierError) {
        let type = String(cString: n.objCType)
        switch type {
        case "c", "B": bytes += n.boolValue ? Array("true".utf8) : Array("false".utf8)
        case "f", "d": try double(n.doubleValue)
        case "Q", "L", "I", "S", "C": bytes += Array(String(n.uint64Value).utf8)
        default: bytes += Array(String(n.int64Value).utf8)
        }
    }

    private mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for b in s.utf8 { escaped(b) }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func escaped(_ b: UInt8) {
        switch b {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), b]
        case 0x0A: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case 0x0D: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        case 0x09: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case 0..<0x20:
            let hex = Array("0123456789abcdef".utf8)
            bytes += Array("\\u00".utf8) + [hex[Int(b >> 4)], hex[Int(b & 0xF)]]
        default: bytes.append(b)
        }
    }
}

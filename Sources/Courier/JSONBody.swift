import Foundation

/// Turns `send`'s values into the exact bytes that will be POSTed, or throws `.invalidJSON`
/// naming the offending path. `JSONSerialization` traps on values it cannot represent, so
/// every value is checked before it is reached.
enum JSONBody {
    static func serialize(_ object: [String: Any]) throws(CourierError) -> [UInt8] {
        try validate(object, path: "$", depth: 0)
        guard JSONSerialization.isValidJSONObject(object) else {
            throw CourierError(.invalidJSON, "JSONSerialization rejects the value")
        }
        do {
            return Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
        } catch {
            throw CourierError(.invalidJSON, "\(error)")
        }
    }

    static func encode(_ value: some Encodable) throws(CourierError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(value))
        } catch {
            // JSONEncoder throws (does not trap) on NaN and infinity.
            throw CourierError(.invalidJSON, "cannot encode \(type(of: value)) as JSON: \(error)")
        }
    }

    /// Nesting deeper than this is refused (a cycle through NSArray/NSDictionary would
    /// otherwise recurse forever).
    static let maximumDepth = 100

    static func validate(_ value: Any, path: String, depth: Int) throws(CourierError) {
        guard depth <= maximumDepth else { throw CourierError(.invalidJSON, "\(path): nested deeper than \(maximumDepth) levels") }
        switch value {
        case is String, is NSNull, is Bool:
            return
        case let n as Double:
            guard n.isFinite else { throw CourierError(.invalidJSON, "\(path): \(n) is not a JSON number") }
        case let n as Float:
            guard n.isFinite else { throw CourierError(.invalidJSON, "\(path): \(n) is not a JSON number") }
        case is Int, is Int8, is Int16, is Int32, is Int64, is UInt, is UInt8, is UInt16, is UInt32, is UInt64:
            return
        case let n as NSNumber:
            guard n.doubleValue.isFinite else { throw CourierError(.invalidJSON, "\(path): \(n) is not a JSON number") }
        case let d as [String: Any]:
            for (k, v) in d { try validate(v, path: path + "." + k, depth: depth + 1) }
        case let a as [Any]:
            for (i, v) in a.enumerated() { try validate(v, path: "\(path)[\(i)]", depth: depth + 1) }
        case is Date:
            throw CourierError(.invalidJSON, "\(path): a Date has no JSON form; send a string (ISO 8601) or a number")
        case is Data:
            throw CourierError(.invalidJSON, "\(path): Data has no JSON form; send a base64 string")
        default:
            throw CourierError(.invalidJSON, "\(path): a value of type \(type(of: value)) has no JSON form")
        }
    }
}

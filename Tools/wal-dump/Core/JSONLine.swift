/// A JSON object written with keys in insertion order, so output is stable for snapshots and
/// diffs (Foundation's encoders do not promise an order).
public struct JSONLine {
    private var parts: [String] = []
    public init() {}

    public mutating func add(_ key: String, _ value: String) { parts.append("\(Self.quote(key)):\(Self.quote(value))") }
    public mutating func add(_ key: String, _ value: Int) { parts.append("\(Self.quote(key)):\(value)") }
    public mutating func add(_ key: String, _ value: UInt64) { parts.append("\(Self.quote(key)):\(value)") }
    public mutating func add(_ key: String, _ value: Bool) { parts.append("\(Self.quote(key)):\(value)") }
    public mutating func addRaw(_ key: String, _ json: String) { parts.append("\(Self.quote(key)):\(json)") }

    public var text: String { "{" + parts.joined(separator: ",") + "}" }

    public static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// `2026-11-21T15:29:18.123Z` from milliseconds since 1970, without a formatter (stable on
/// every platform; days-from-civil inverse after Howard Hinnant).
public func iso8601(milliseconds: UInt64) -> String {
    let ms = Int(milliseconds % 1000)
    let seconds = Int(milliseconds / 1000)
    let days = seconds / 86_400
    let secondOfDay = seconds % 86_400
    let z = days + 719_468
    let era = z / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func pad(_ v: Int, _ n: Int) -> String {
        let s = String(v); return String(repeating: "0", count: max(0, n - s.count)) + s
    }
    let date = "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    let clock = "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
    let time = "\(clock).\(pad(ms, 3))"
    return "\(date)T\(time)Z"
}

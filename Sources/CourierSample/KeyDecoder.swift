import CourierKit

/// Turns terminal input bytes into keys. Escape sequences (arrows, …) are swallowed whole.
public struct KeyDecoder {
    private var pending: [UInt8] = []

    public init() {}

    public mutating func decode(_ bytes: [UInt8]) -> [SampleViewModel.Key] {
        pending += bytes
        var keys: [SampleViewModel.Key] = []
        var i = 0
        // Each turn consumes at least one byte.
        while i < pending.count {
            let b = pending[i]
            switch b {
            case 3: keys.append(.interrupt); i += 1
            case 9: keys.append(.tab); i += 1
            case 10, 13: keys.append(.enter); i += 1
            case 8, 127: keys.append(.backspace); i += 1
            case 27:
                // ESC [ … final byte (0x40–0x7E): skip the sequence; a lone ESC is skipped too.
                if i + 1 < pending.count, pending[i + 1] == UInt8(ascii: "[") {
                    var j = i + 2
                    while j < pending.count && !(0x40...0x7E).contains(pending[j]) { j += 1 }
                    if j >= pending.count { pending = Array(pending[i...]); return keys }  // incomplete: wait
                    if pending[j] == UInt8(ascii: "Z") { keys.append(.tab) }  // Shift-Tab moves focus too
                    i = j + 1
                } else {
                    i += 1
                }
            case 0..<32: i += 1
            default:
                // A UTF-8 character: its length from the lead byte.
                let length = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4
                if i + length > pending.count { pending = Array(pending[i...]); return keys }
                let character = pending[i..<(i + length)]
                if isWellFormedUTF8(character), let c = String(decoding: character, as: UTF8.self).first {
                    keys.append(.character(c))
                }
                i += length
            }
        }
        pending.removeAll()
        return keys
    }
}

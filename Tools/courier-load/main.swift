// courier-load: sends messages through a Courier and prints each id as soon as `send`
// returned (flushed), so a parent process knows exactly which sends were acknowledged. Used by
// the SIGKILL crash tests and for quick load runs.
//
//     courier-load DIR URL COUNT [PAUSE_MICROSECONDS] [--segment-size N] [--max-message N]
//                  [--durability never|interval|always] [--bodies SEED] [--idle SECONDS]
//
// With `--idle SECONDS`, it opens the courier, sends COUNT messages, then sits idle that long
// before closing (for `strace -c -f` of an idle courier).
// With `--bodies SEED`, bodies are random (seeded) raw bytes: empty, up to `--max-message`,
// compressible or not. Otherwise each body is a small JSON object.
import CourierKit
import CourierLog
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a line straight to file descriptor 1 (no stdio buffer): once written, a parent
/// reading the pipe sees it even if this process is killed the next instant.
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

func usage() -> Never {
    print(
        "usage: courier-load DIR URL COUNT [PAUSE_MICROSECONDS] [--segment-size N] [--max-message N] [--durability "
            + "never|interval|always] [--bodies SEED] [--idle SECONDS]"
    )
    exit(2)
}

var positional: [String] = []
var options: [String: String] = [:]
var rest = CommandLine.arguments.dropFirst()
// Each turn consumes one or two arguments: bounded by the argument count.
while let arg = rest.popFirst() {
    if arg.hasPrefix("--") {
        guard let value = rest.popFirst() else { usage() }
        options[String(arg.dropFirst(2))] = value
    } else {
        positional.append(arg)
    }
}
guard positional.count == 3 || positional.count == 4, let url = URL(string: positional[1]),
    let count = Int(positional[2])
else { usage() }
let pause = positional.count == 4 ? UInt32(positional[3]) ?? 0 : 0

var config = Courier.Configuration()

config.allowsPurgeableDirectory = true  // a scratch directory, in tmp
config.retry = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(50))
if let v = options["segment-size"] { guard let n = Int(v) else { usage() }; config.segmentSizeBytes = n }
if let v = options["max-message"] { guard let n = Int(v) else { usage() }; config.maximumMessageBytes = n }
switch options["durability"] {
case nil: break
case "never": config.durability = .never
case "interval": config.durability = .interval(.milliseconds(100))
case "always": config.durability = .always
default: usage()
}
var bodies: SplitMix64? = options["bodies"].map { SplitMix64(seed: UInt64($0) ?? 0) }

let courier: Courier
do {
    courier = try Courier(directory: URL(fileURLWithPath: positional[0]), configuration: config)
} catch {
    emit("error: \(error)")
    exit(1)
}
for i in 0..<count {
    do {
        let id: MessageID
        if var rng = bodies {
            let body = rng.body(maximum: config.maximumMessageBytes)
            bodies = rng
            id = try courier.send(data: body, contentType: "application/octet-stream", to: url)
        } else {
            id = try courier.send(["n": i, "text": "message \(i) from pid \(getpid())"], to: url)
        }
        emit(id.description)
        if pause > 0 { usleep(pause) }
    } catch {
        emit("error: \(error)")
        exit(1)
    }
}
await courier.waitUntilIdle()
if let idle = options["idle"].flatMap(Int.init) {
    emit("idle")
    try? await Task.sleep(for: .seconds(idle))
}
await courier.close()
emit("done")

/// Seeded bodies, the same for the same seed (SplitMix64, the package's one seeded generator).
extension SplitMix64 {
    /// Empty, the maximum, or in between; random bytes or repeated text.
    mutating func body(maximum: Int) -> Data {
        let size = [0, maximum, Int.random(in: 0...maximum, using: &self)].randomElement(using: &self)!
        if Bool.random(using: &self) { return Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &self) }) }
        return Data(String(repeating: "abcd", count: size / 4 + 1).utf8.prefix(size))
    }
}

#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
#endif
import CourierKit
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A transport that never answers until cancelled: every message stays pending.
struct Parked: DeliveryTransport {
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        try? await Task.sleep(for: .seconds(86_400))
        return .failure(TransportFailure(.cancelled, "cancelled"))
    }
}

/// A transport that answers 503 at once: every message waits out its backoff.
struct Refusing: DeliveryTransport {
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome { .response(status: 503) }
}

func residentBytes() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = statm.split(separator: " ")
    return (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// CPU time (user + system) this process used so far, and its voluntary context switches.
func cpuUsage() -> (seconds: Double, wakeups: Int) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let cpu =
        Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
        / 1e6
    return (cpu, usage.ru_nvcsw)
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
/// Unbuffered, so a figure is seen even if a later step fails.
func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }
/// A label padded to a column, then the value (a longer label is kept whole, a space after it).
func line(_ label: String, _ value: String) {
    say((label.count < 64 ? label.padding(toLength: 64, withPad: " ", startingAt: 0) : label + " ") + value)
}

/// The message every send benchmark sends: about 150 bytes of JSON.
func benchMessage(_ i: Int) -> [String: Any] {
    ["text": "message number \(i) with a little payload, typical of a chat or analytics event", "n": i, "kind": "bench"]
}

let target = URL(string: "https://example.com/inbox")!

/// Runs this executable again with `arguments` and returns its standard output: each memory
/// and open-time figure is taken in a fresh process, so one run's heap does not hide the next.
func runChild(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    precondition(process.terminationStatus == 0, "child \(arguments) failed")
    return String(decoding: data, as: UTF8.self)
}

/// `count` fresh idempotency keys in the form Courier sends (a lower-case UUID, 36 bytes), made
/// before a baseline's clock starts: an app that POSTs with retries needs one per message, and a
/// shorter key is a smaller request, which the loopback server parses faster (its header parser
/// works byte by byte: keys like `ahc-17` made the baseline's requests 31 bytes shorter, and the
/// server's share of the run about 20 % smaller, when measured on 2026-11-26).
func idempotencyKeys(_ count: Int) -> [String] { (0..<count).map { _ in MessageID().description } }

#if canImport(AsyncHTTPClient)
/// One bare AsyncHTTPClient POST of message `n`, as the baseline makes it; true on a 200.
func barePost(_ client: HTTPClient, to url: URL, n: Int, key: String) async -> Bool {
    var request = HTTPClientRequest(url: url.absoluteString)
    request.method = .POST
    request.headers.add(name: "Content-Type", value: "application/json")
    request.headers.add(name: "Idempotency-Key", value: key)
    request.body = .bytes(.init(string: #"{"n":\#(n),"text":"hello"}"#))
    guard let response = try? await client.execute(request, timeout: .seconds(30)) else { return false }
    _ = try? await response.body.collect(upTo: 1 << 16)
    return response.status.code == 200
}
#endif

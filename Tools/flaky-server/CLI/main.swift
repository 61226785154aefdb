// flaky-server: an HTTP server that fails on purpose (see FlakyServer), on 127.0.0.1 unless
// --host says otherwise. It prints one line per request it gets (see ServerState.logArrival).
//
//     swift run flaky-server --port 8080 --failure-rate 0.5 --drop-rate 0.05
//     swift run flaky-server --host 0.0.0.0 --port 18787   # a phone on the same Wi-Fi reaches it
import ArgumentParser
import FlakyServer
import Foundation

@main
struct FlakyServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flaky-server",
        abstract: "An HTTP server that answers POSTs with 500 at random, and more.",
        discussion: """
            GET /stats returns counters as JSON. Stops after --seconds (default 600). Prints one line per \
            request: arrival time (UTC), method, path, Idempotency-Key, body bytes, and the answer.
            """)

    @Option(help: "IPv4 address to listen on (0.0.0.0: every interface, for a phone on the same network).")
    var host = "127.0.0.1"
    @Option(help: "Port (0: any free port).") var port: UInt16 = 8080
    @Option(help: "Chance of a 500.") var failureRate = 0.5
    @Option(help: "Chance of closing the connection without an answer.") var dropRate = 0.0
    @Option(help: "Chance of a 429 with Retry-After.") var rateLimitRate = 0.0
    @Option(help: "Retry-After seconds sent with 429.") var retryAfter = 1
    @Option(help: "Delay before answering, in milliseconds.") var delayMs = 0
    @Option(help: "Stop after this many seconds (bounded, as every test server here).") var seconds = 600

    func validate() throws {
        for rate in [failureRate, dropRate, rateLimitRate] where !(0...1).contains(rate) {
            throw ValidationError("rates are between 0 and 1")
        }
        // The listener takes an IPv4 literal only; say so here rather than as a socket error.
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets.allSatisfy({ UInt8($0) != nil }) else {
            throw ValidationError("--host takes an IPv4 address, such as 127.0.0.1 or 0.0.0.0")
        }
    }

    func run() async throws {
        let behavior = FlakyServer.Behavior(
            failureRate: failureRate, dropRate: dropRate, rateLimitRate: rateLimitRate,
            retryAfterSeconds: retryAfter, delay: .milliseconds(delayMs))
        let server = try await FlakyServer(behavior: behavior, host: host, port: port, log: { say($0) })
        say("flaky-server listening on \(await server.url) (stats: GET /stats); stopping in \(seconds) s")
        if host == "0.0.0.0" { sayLocalNetworkURLs(await server.localNetworkURLs) }
        try await Task.sleep(for: .seconds(seconds))
        await server.stop()
        say(String(describing: server.statistics))
    }

    /// Where a phone on the same network finds the server (it cannot use 127.0.0.1: that is itself).
    func sayLocalNetworkURLs(_ urls: [(interface: String, url: URL)]) {
        guard !urls.isEmpty else {
            say("listening on every interface, but this machine has no IPv4 address besides loopback")
            return
        }
        say("listening on every interface; from a phone on the same network, use one of:")
        for (interface, url) in urls { say("  \(url)  (\(interface))") }
    }
}

/// One line on standard output, written at once: print's buffer would hold the arrival log
/// back while stdout is a pipe (`| tee`), and this keeps the lines in the order they happened.
/// One write(2) each, so lines from concurrent requests never interleave.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

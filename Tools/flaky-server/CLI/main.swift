// flaky-server: a loopback HTTP server that fails on purpose (see FlakyServer).
//
//     swift run flaky-server --port 8080 --failure-rate 0.5 --drop-rate 0.05
import ArgumentParser
import FlakyServer
import Foundation

@main
struct FlakyServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flaky-server",
        abstract: "A 127.0.0.1 HTTP server that answers POSTs with 500 at random, and more.",
        discussion: "GET /stats returns counters as JSON. Stops after --seconds (default 600).")

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
    }

    func run() async throws {
        let behavior = FlakyServer.Behavior(
            failureRate: failureRate, dropRate: dropRate, rateLimitRate: rateLimitRate,
            retryAfterSeconds: retryAfter, delay: .milliseconds(delayMs))
        let server = try await FlakyServer(behavior: behavior, port: port)
        print("flaky-server listening on \(await server.url) (stats: GET /stats); stopping in \(seconds) s")
        try await Task.sleep(for: .seconds(seconds))
        await server.stop()
        print(server.statistics)
    }
}

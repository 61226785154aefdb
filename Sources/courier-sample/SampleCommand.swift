// courier-sample: the one-screen sample app. A text field, a [ Send ] button, and the messages
// sent in this and earlier runs with their state, live. By default it talks to a flaky server
// it starts itself on 127.0.0.1 (500 half the time, like the first user's server).
//
//     swift run courier-sample [--url URL] [--failure-rate 0.5] [--directory DIR] [--port 18787]
import ArgumentParser
import CourierKit
import CourierSample
import FlakyServer
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct SampleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier-sample",
        abstract: "Type a message, press Send, watch Courier deliver it to a flaky server.")

    @Option(
        help: ArgumentHelp(
            "Send to this server instead of the built-in flaky one (e.g. "
                + "https://challenge.ronash.co/reliable-messaging)."))
    var url: String?
    @Option(help: "Chance that the built-in server answers 500.") var failureRate = 0.5
    @Option(help: "Chance that the built-in server drops the connection.") var dropRate = 0.0
    @Option(help: "Port of the built-in server (fixed, so messages pending from an earlier run find it again).")
    var port: UInt16 = 18787
    @Option(help: "Where the message log lives.") var directory = "courier-sample-data"
    @Option(help: "Largest retry delay, seconds (short, so the demo is watchable).") var maxDelay = 8.0

    func validate() throws {
        guard (0...1).contains(failureRate), (0...1).contains(dropRate) else {
            throw ValidationError("rates are between 0 and 1")
        }
        if let url, URL(string: url)?.scheme == nil { throw ValidationError("--url must be an absolute http(s) URL") }
    }

    func run() async throws {
        guard Terminal.isInteractive else {
            let message =
                "courier-sample draws a full-screen UI and needs a terminal; standard input and output "
                + "must be a TTY.\n"
            FileHandle.standardError.write(Data(message.utf8))
            throw ExitCode(1)
        }
        var server: FlakyServer?
        let target: URL
        let serverDescription: String
        if let url {
            target = URL(string: url)!
            serverDescription = url
        } else {
            server = try await FlakyServer(behavior: .init(failureRate: failureRate, dropRate: dropRate), port: port)
            target = await server!.url
            serverDescription = "\(target.absoluteString) (built-in, \(Int(failureRate * 100))% 500s)"
        }
        var configuration = Courier.Configuration()
        configuration.retry = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(maxDelay))
        // The demo's log is scratch (`make demo` keeps it in .build/demo-outbox, which is under tmp
        // when the checkout is; the smoke test uses mktemp). An app keeps its log in Application
        // Support, where this flag stays false.
        configuration.allowsPurgeableDirectory = true
        let courier = try Courier(directory: URL(fileURLWithPath: directory), configuration: configuration)
        let app = await TerminalApp(
            courier: courier, server: target, logDirectory: courier.directory.path,
            serverDescription: serverDescription)
        await app.run()
        await server?.stop()
    }
}

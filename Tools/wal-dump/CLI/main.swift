import ArgumentParser
import WALDumpCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Prints to standard error.
func printError(_ line: String) {
    var stderr = StandardError()
    print(line, to: &stderr)
}

#if canImport(Glibc)
let systemWrite = Glibc.write
#else
let systemWrite = Darwin.write
#endif

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var bytes = Array(string.utf8)
        _ = bytes.withUnsafeMutableBytes { systemWrite(2, $0.baseAddress, $0.count) }
    }
}

struct WALDump: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wal-dump",
        abstract: "Inspect a Courier write-ahead log directory. Read-only: never locks, truncates or repairs.",
        discussion: "Exit status: 0 ok, 1 damage found (verify), 2 usage error or unreadable directory.",
        subcommands: [Records.self, Stats.self, Verify.self])
}

struct DirectoryArgument: ParsableArguments {
    @Argument(help: "The log directory (holding NNNNNNNNNNNNNNNN.wal segment files).")
    var directory: String

    func dump() -> Dump {
        Dump(directory: directory, out: { print($0) }, err: printError)
    }
}

struct Records: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One line per record: segment, offset, length, seq, type, time.")
    @OptionGroup var target: DirectoryArgument
    @Flag(help: "One JSON object per line (keys: segment, offset, length, seq, type, id, …).") var json = false
    @Flag(help: "Include record bodies (hidden by default).") var payload = false
    func run() throws { try finish(target.dump().records(json: json, payload: payload)) }
}

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Segments, bytes, records per type, live vs dead, damage, torn tail.")
    @OptionGroup var target: DirectoryArgument
    @Flag(help: "One JSON object.") var json = false
    func run() throws { try finish(target.dump().stats(json: json)) }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 if the log is clean (a torn tail of the newest segment is fine), 1 naming each damaged span.")
    @OptionGroup var target: DirectoryArgument
    func run() throws { try finish(target.dump().verify()) }
}

func finish(_ status: Dump.Status) throws {
    if status != .ok { throw ExitCode(status.rawValue) }
}

// Usage errors exit 2 (ArgumentParser's default is 64), as the tool's contract says.
// No subcommand at all is a usage error, not a help request.
if CommandLine.arguments.count < 2 {
    printError(WALDump.helpMessage())
    exit(Dump.Status.usage.rawValue)
}
do {
    var command = try WALDump.parseAsRoot()
    try command.run()
} catch let code as ExitCode {
    exit(code.rawValue)
} catch {
    let status = WALDump.exitCode(for: error)
    let message = WALDump.fullMessage(for: error)
    if status == .success {
        print(message)  // --help
        exit(0)
    }
    printError(message)
    exit(Dump.Status.usage.rawValue)
}

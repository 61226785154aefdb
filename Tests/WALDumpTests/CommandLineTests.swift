import CourierLogTesting
import Foundation
import Testing

/// The built `wal-dump` binary, next to the test bundle (`swift build --build-tests` builds both).
func walDumpBinary() -> String {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var dir = testBinary.deletingLastPathComponent()
    // On Linux the bundle is `…/debug/CourierPackageTests.xctest`; on macOS a directory
    // `…/debug/CourierPackageTests.xctest/Contents/MacOS/…`. Walk up to the folder with wal-dump.
    for _ in 0..<4 where !FileManager.default.fileExists(atPath: dir.appendingPathComponent("wal-dump").path) {
        dir = dir.deletingLastPathComponent()
    }
    return dir.appendingPathComponent("wal-dump").path
}

/// Runs wal-dump with `arguments`; returns exit status and standard output.
func walDump(_ arguments: [String]) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: walDumpBinary())
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite struct CommandLineTests {
    @Test func theBinaryIsBuiltNextToTheTests() {
        #expect(FileManager.default.isExecutableFile(atPath: walDumpBinary()),
                "build it first: `make test` (or `swift build --build-tests`) builds wal-dump")
    }

    @Test(arguments: goldenNames)
    func verifyExitStatusOnEachGoldenLog(name: String) throws {
        let (status, output) = try walDump(["verify", fixtures + "/logs/" + name])
        #expect(status == expectedVerifyStatus[name], "\(name): \(output)")
    }

    @Test func usageErrorsExitTwo() throws {
        #expect(try walDump([]).0 == 2)
        #expect(try walDump(["verify"]).0 == 2)
        #expect(try walDump(["frobnicate", "x"]).0 == 2)
        #expect(try walDump(["records", fixtures + "/logs/clean", "--bogus"]).0 == 2)
        #expect(try walDump(["verify", "/no/such/directory"]).0 == 2)
        #expect(try walDump(["--help"]).0 == 0)
    }

    @Test func recordsJSONPrintsOneObjectPerRecord() throws {
        let (status, output) = try walDump(["records", fixtures + "/logs/clean", "--json"])
        #expect(status == 0)
        #expect(output.split(separator: "\n").count == 48)
    }
}

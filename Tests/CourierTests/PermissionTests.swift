@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Messages can hold personal data: the log is private to the user on every platform.
@Suite struct PermissionTests {
    func mode(_ path: String) -> mode_t {
        var st = stat()
        _ = stat(path, &st)
        return st.st_mode & 0o777
    }

    @Test func theDirectoryIs0700AndEveryFileIs0600() async throws {
        let dir = TemporaryDirectory()
        let courier = try Courier(
            directory: dir.url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        try courier.send(["n": 1], to: inbox)
        await courier.close()
        #expect(mode(dir.url.path) == 0o700)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(files.count >= 2, "a segment and the lock file")
        for file in files { #expect(mode(dir.url.appendingPathComponent(file).path) == 0o600, "\(file)") }
    }

    @Test func anExistingWiderDirectoryIsNarrowedOnOpen() async throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        #expect(mode(dir.url.path) == 0o755)
        let courier = try Courier(
            directory: dir.url, configuration: testConfiguration(clock: ManualClock(), transport: ScriptedTransport()))
        #expect(mode(dir.url.path) == 0o700)
        await courier.close()
    }
}

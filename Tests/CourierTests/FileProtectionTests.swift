@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// Which paths get which data protection class (the iOS call itself is type-checked by
/// `make ios-check`; here the paths, the order and the setting are checked): the courier's
/// folder and what is in it, before the log makes its first file there (files take their
/// folder's class), and never a folder above it.
@Suite struct FileProtectionTests {
    let scratch = TemporaryDirectory()

    /// Every (path, class) given, and the files each folder held at that moment.
    final class Recorder: @unchecked Sendable {
        let calls = Locked<[(path: String, protection: Courier.FileProtection, filesThen: [String])]>([])
        func set(_ path: String, _ protection: Courier.FileProtection) {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            calls.withLock { $0.append((path, protection, files)) }
        }
        var paths: Set<String> { Set(calls.withLock { $0.map(\.path) }) }
    }

    @Test func onlyTheOutboxFolderAndItsItemsGetTheClassBeforeItsFirstFile() async throws {
        // A fresh install: not even Library exists yet.
        let library = scratch.url.appendingPathComponent("Library")
        let directory = library.appendingPathComponent("Application Support/outbox")
        let recorder = Recorder()
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        configuration.fileProtection = .complete
        configuration.setFileProtection = { recorder.set($0, $1) }
        let courier = try Courier(directory: directory, configuration: configuration)
        let calls = recorder.calls.withLock { $0 }
        #expect(calls.allSatisfy { $0.protection == .complete }, "the configured class, not a fixed one")
        #expect(calls.first?.path == directory.path && calls.first?.filesThen.isEmpty == true,
                "the folder first, before the lock file and the first segment")
        #expect(recorder.paths.allSatisfy { $0 == directory.path || $0.hasPrefix(directory.path + "/") },
                "nothing above the folder: \(recorder.paths.sorted())")
        #expect(recorder.paths.contains(directory.path + "/LOCK"), "again once open, for what is there")
        await courier.close()
    }

    /// The extension outbox's folder takes the class it is given, before its first file; the
    /// App Group container above it never does.
    @Test func theExtensionOutboxFolderTakesItsClassAndNothingAboveIt() throws {
        let group = scratch.url.appendingPathComponent("AppGroup/ABC")
        let directory = group.appendingPathComponent("ExtensionOutbox")
        let recorder = Recorder()
        let outbox = try ExtensionOutbox(
            directory: directory, fileSystem: PosixFileSystem(), fileProtection: .completeUnlessOpen,
            setProtection: { recorder.set($0, $1) }, suspensionGuard: .none)
        _ = try outbox.send(["n": 1], to: inbox)
        let calls = recorder.calls.withLock { $0 }
        #expect(calls.map(\.path) == [directory.path], "the folder only, while empty: its files inherit")
        #expect(calls.allSatisfy { $0.protection == .completeUnlessOpen && $0.filesThen.isEmpty })
    }

    @Test func theDefaultIsWhatBackgroundDeliveryNeeds() {
        #expect(Courier.Configuration().fileProtection == .completeUntilFirstUserAuthentication)
    }

    /// Background uploads are read by the system's daemon while the device may be locked: a
    /// class that locks files then is a configuration problem, said with the fix.
    @Test(arguments: [Courier.FileProtection.complete, .completeUnlessOpen])
    func aClassLockedWhileTheDeviceIsLockedIsRefusedWithBackgroundUploads(protection: Courier.FileProtection) {
        var configuration = Courier.Configuration()
        configuration.fileProtection = protection
        #expect(configuration.problems.isEmpty)
        configuration.backgroundUploads = Courier.BackgroundUploads(session: RecordingSession())
        #expect(configuration.problems.contains { $0.contains("fileProtection") && $0.contains("backgroundUploads") })
    }
}

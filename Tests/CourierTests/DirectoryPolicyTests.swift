@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// Where a courier may keep its log (`DirectoryPolicy`): never where the system purges files,
/// and with a warning inside an App Group container.
@Suite struct DirectoryPolicyTests {
    let roots = [
        DirectoryPolicy.Root(path: "/var/mobile/Containers/Data/Application/A/tmp/", kind: "tmp"),
        DirectoryPolicy.Root(path: "/var/mobile/Containers/Data/Application/A/Library/Caches", kind: "Caches"),
    ]

    func judge(_ path: String) -> DirectoryPolicy.Verdict {
        DirectoryPolicy.judge(URL(fileURLWithPath: path), roots: roots)
    }

    @Test func tmpAndCachesArePurgeableWhereverTheyAre() {
        let app = "/var/mobile/Containers/Data/Application/A"
        #expect(judge(app + "/tmp/outbox").purgeable?.kind == "tmp")
        #expect(judge(app + "/tmp").purgeable?.kind == "tmp")
        #expect(judge(app + "/Library/Caches/outbox").purgeable?.kind == "Caches")
        #expect(judge(app + "/tmp/../Library/Caches/x").purgeable?.kind == "Caches", "resolved before judging")
        let groupCaches = "/private/var/mobile/Containers/Shared/AppGroup/G/Library/Caches/outbox"
        #expect(judge(groupCaches).purgeable?.kind == "Caches", "any Library/Caches, an App Group's too")
    }

    @Test func applicationSupportAndLookAlikesAreSuitable() {
        let app = "/var/mobile/Containers/Data/Application/A"
        #expect(judge(app + "/Library/Application Support/outbox") == DirectoryPolicy.Verdict())
        #expect(judge(app + "/tmpfiles/outbox").purgeable == nil, "a prefix of a name is not the directory")
        #expect(judge(app + "/Library/CachesOld/outbox").purgeable == nil)
    }

    @Test func anIOSAppGroupContainerIsNotedAndAMacOSGroupContainerIsNot() {
        #expect(judge("/private/var/mobile/Containers/Shared/AppGroup/G/outbox").inAppGroupContainer)
        #expect(!judge("/Users/me/Library/Group Containers/group.com.example/outbox").inAppGroupContainer)
        #expect(!judge("/var/mobile/Containers/Data/Application/A/Library/outbox").inAppGroupContainer)
    }

    @Test func thisMachinesTmpIsPurgeable() {
        let verdict = DirectoryPolicy.judge(URL(fileURLWithPath: NSTemporaryDirectory() + "outbox"))
        #expect(verdict.purgeable?.kind == "tmp")
        #expect(DirectoryPolicy.judge(URL(fileURLWithPath: "/tmp/x/outbox")).purgeable?.kind == "tmp")
        #expect(DirectoryPolicy.judge(URL(fileURLWithPath: "/var/tmp/outbox")).purgeable?.kind == "tmp")
    }

    /// Opening in tmp throws `.unsuitableDirectory`, says why and where to go instead, and
    /// writes nothing.
    @Test func aCourierOpenedInTmpFailsWithAClearErrorAndWritesNothing() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("c-\(UUID().uuidString)")
        var configuration = Courier.Configuration()
        configuration.transport = ScriptedTransport()
        do {
            _ = try Courier(directory: directory, configuration: configuration)
            Issue.record("opened in tmp")
        } catch {
            #expect(error.code == .unsuitableDirectory)
            #expect(error.message.contains(directory.path))
            #expect(error.message.contains("Application Support"))
            #expect(error.message.contains("allowsPurgeableDirectory"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path))
        await #expect(throws: CourierError.self) {
            try await Courier.open(directory: directory, configuration: configuration)
        }
    }

    /// A courier locks its directory while open: in a shared container iOS would kill the app
    /// suspended holding it (0xdead10cc). Refused before anything is written, with the way out.
    @Test func aCourierInAnAppGroupContainerIsRefused() throws {
        let temporary = TemporaryDirectory()
        let directory = temporary.url.appendingPathComponent("Shared/AppGroup/G/outbox")
        let configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        #expect { try Courier(directory: directory, configuration: configuration) } throws: { error in
            let error = error as? CourierError
            return error?.code == .unsuitableDirectory && error?.message.contains("0xdead10cc") == true
                && error?.message.contains("ExtensionOutbox") == true
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }
}

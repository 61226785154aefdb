@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// The log's protection class is set before the log makes its first file: files inherit their
/// directory's class, so none starts in another (the iOS call itself is type-checked by
/// `make ios-check`; here the order and the setting are checked).
@Suite struct FileProtectionTests {
    let scratch = TemporaryDirectory()

    @Test func theProtectionIsAppliedBeforeTheLogMakesItsFirstFile() async throws {
        let directory = scratch.url.appendingPathComponent("outbox")
        let seen = Locked<[(Courier.FileProtection, [String]?)]>([])
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        configuration.fileProtection = .complete
        configuration.applyFileProtection = { url, protection in
            let files = try? FileManager.default.contentsOfDirectory(atPath: url.path)
            seen.withLock { $0.append((protection, files)) }
        }
        let courier = try Courier(directory: directory, configuration: configuration)
        let calls = seen.withLock { $0 }
        #expect(calls.count == 2)
        #expect(calls.allSatisfy { $0.0 == .complete }, "the configured class, not a fixed one")
        let firstSeen = calls.first?.1 ?? []
        #expect(firstSeen.isEmpty, "before the lock file and the first segment")
        let lastSeen = calls.last?.1 ?? []
        #expect(lastSeen.contains("LOCK"), "again once open, for what an earlier version made")
        await courier.close()
    }

    @Test func theDefaultIsWhatBackgroundDeliveryNeeds() {
        #expect(Courier.Configuration().fileProtection == .completeUntilFirstUserAuthentication)
    }
}

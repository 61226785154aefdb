@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// The extension outbox on the simulated file system: its writers and the app's collection
/// through power cuts at every step, a full disk, a failed directory sync, a file an extension
/// holds, and the suspension guard around every lock in the shared folder.
@Suite struct ExtensionOutboxDurabilityTests {
    static let shared = URL(fileURLWithPath: "/group/ExtensionOutbox")
    static let appDirectory = URL(fileURLWithPath: "/app")

    /// An extension's outbox on `fs`, its suspension guard counting the work it covers.
    static func outbox(
        _ fs: SimulatedFileSystem, guarded: Locked<Int> = Locked(0), grants: Bool = true
    ) throws -> ExtensionOutbox {
        try ExtensionOutbox(
            directory: shared, fileSystem: fs, fileProtection: .completeUntilFirstUserAuthentication,
            setProtection: { _, _ in }, suspensionGuard: counting(guarded, grants: grants))
    }

    static func counting(_ count: Locked<Int>, grants: Bool = true) -> SuspensionGuard {
        SuspensionGuard { _, body in
            guard grants else { return false }
            count.withLock { $0 += 1 }
            body()
            return true
        }
    }

    /// The app, collecting from the shared folder on `fs`; nothing is delivered.
    static func app(
        _ fs: SimulatedFileSystem, _ durability: Courier.Durability, guarded: Locked<Int> = Locked(0)
    ) throws -> Courier {
        let held = ScriptedTransport()
        held.holdResponses = true
        var configuration = testConfiguration(clock: ManualClock(), transport: held)
        configuration.fileSystem = fs
        configuration.durability = durability
        configuration.extensionOutboxDirectory = shared
        configuration.suspensionGuard = counting(guarded)
        return try Courier(directory: appDirectory, configuration: configuration)
    }

    /// What a power cut leaves: the app reopened on `fs` (its open collects), collecting again.
    static func pendingAfterPowerCut(_ fs: SimulatedFileSystem) async throws -> [MessageID] {
        fs.crash()
        let again = try app(fs, .never)
        await again.collectExtensionMessages()
        let pending = await again.pendingMessages().map(\.id)
        await again.close()
        return pending
    }

    @Test func everySendThatReturnedSurvivesAPowerCut() async throws {
        let fs = SimulatedFileSystem()
        let outbox = try Self.outbox(fs)
        let sent = try (0..<5).map { try outbox.send(["n": $0], to: inbox) }
        #expect(try await Self.pendingAfterPowerCut(fs).sorted() == sent.sorted())
    }

    /// The machine stops after k more file operations, for every k a send takes: what returned
    /// before survives, and the send cut short is never half there.
    @Test func aSendCutAtAnyStepLosesNothingThatReturned() async throws {
        var k = 0
        // Bounded: a send takes a dozen operations; k grows until one completes uncut.
        while k < 100 {
            let fs = SimulatedFileSystem()
            let outbox = try Self.outbox(fs)
            let before = try (0..<2).map { try outbox.send(["n": $0], to: inbox) }
            fs.stopAfter(operations: k)
            let cut = try? outbox.send(["n": "cut"], to: inbox)
            let pending = Set(try await Self.pendingAfterPowerCut(fs))
            #expect(pending.isSuperset(of: before), "cut after \(k) operations")
            #expect(pending.isSubset(of: Set(before + [cut].compactMap { $0 })))
            if cut != nil { #expect(pending.contains(cut!)); break }
            k += 1
        }
        #expect(k > 0 && k < 100)
    }

    /// The machine stops after k more file operations of a collection, for every k, under each
    /// durability of the app's log: after the cut, reopening and collecting again finds every
    /// message the extension sent, once (a claimed file goes only after the app's log is synced).
    @Test(arguments: [Courier.Durability.always, .interval(.milliseconds(20)), .never])
    func aCollectionCutAtAnyStepLosesNothing(durability: Courier.Durability) async throws {
        let steps = try await Self.collectionSteps(durability)
        #expect(steps > 4)
        for k in 0...steps {
            let fs = SimulatedFileSystem()
            let sent = try (0..<4).map { try Self.outbox(fs).send(["n": $0], to: inbox) }
            fs.stopAfter(operations: k)
            let app = try? Self.app(fs, durability)  // its open starts a collection
            await app?.collectExtensionMessages()
            let pending = try await Self.pendingAfterPowerCut(fs)
            #expect(pending.sorted() == sent.sorted(), "cut after \(k) of \(steps) operations")
            _ = app
        }
    }

    /// The mutating file operations an app's open and collection of four messages take, uncut.
    static func collectionSteps(_ durability: Courier.Durability) async throws -> Int {
        let fs = SimulatedFileSystem()
        _ = try (0..<4).map { try outbox(fs).send(["n": $0], to: inbox) }
        let mutating: [SimulatedFileSystem.Operation] = [
            .write, .sync, .syncDirectory, .remove, .rename, .create, .truncate,
        ]
        let before = mutating.reduce(0) { $0 + fs.count(of: $1) }
        let app = try app(fs, durability)
        await app.collectExtensionMessages()
        #expect(app.pendingCount == 4)
        let steps = mutating.reduce(0) { $0 + fs.count(of: $1) } - before
        await app.close()
        return steps
    }

    @Test func aFullDiskIsStorageFullAndTheNextSendWorks() throws {
        let fs = SimulatedFileSystem()
        let outbox = try Self.outbox(fs)
        _ = try outbox.send(["n": 1], to: inbox)
        fs.inject(.error(28), on: .write)
        #expect { try outbox.send(["n": 2], to: inbox) } throws: { ($0 as? CourierError)?.code == .storageFull }
        _ = try outbox.send(["n": 3], to: inbox)
    }

    /// A new file's name is durable only with its directory's sync: a failed one is an error,
    /// never a silent return.
    @Test func aFailedDirectorySyncIsReported() throws {
        let fs = SimulatedFileSystem()
        let outbox = try Self.outbox(fs)
        fs.inject(.error(5), on: .syncDirectory)
        #expect { try outbox.send(["n": 1], to: inbox) } throws: { ($0 as? CourierError)?.code == .storageFailed }
    }

    /// The app's claim never waits for a lock: a file an extension holds is skipped, and claimed
    /// by a later collection.
    @Test(.timeLimit(.minutes(1)))
    func aFileAnExtensionHoldsIsSkippedNotWaitedFor() async throws {
        let fs = SimulatedFileSystem()
        let id = try Self.outbox(fs).send(["n": 1], to: inbox)
        let writers = OutboxFiles.writersPath(Self.shared.path)
        let name = try #require(try fs.contentsOfDirectory(atPath: writers).first)
        let held = try fs.openFile(atPath: writers + "/" + name, create: false)
        #expect(try held.lock(waiting: true))
        let app = try Self.app(fs, .never)
        #expect(await app.collectExtensionMessages() == 0, "skipped, not waited for")
        held.unlock()
        #expect(await app.collectExtensionMessages() == 1)
        #expect(await app.pendingMessages().map(\.id) == [id])
        await app.close()
    }

    /// Every lock in the shared folder is taken inside the suspension guard; when the system
    /// grants no time, nothing is written (the send throws) and nothing is claimed.
    @Test func everyLockInTheSharedFolderIsTakenUnderTheSuspensionGuard() async throws {
        let fs = SimulatedFileSystem()
        let sends = Locked(0), claims = Locked(0)
        let outbox = try Self.outbox(fs, guarded: sends)
        _ = try (0..<3).map { try outbox.send(["n": $0], to: inbox) }
        #expect(sends.withLock { $0 } == 3)
        let refusing = try Self.outbox(fs, grants: false)
        #expect { try refusing.send(["n": 4], to: inbox) } throws: { ($0 as? CourierError)?.code == .storageFailed }
        let app = try Self.app(fs, .never, guarded: claims)
        await app.collectExtensionMessages()
        #expect(claims.withLock { $0 } >= 1, "the claims ran inside it")
        #expect(app.pendingCount == 3, "the refused send wrote nothing")
        await app.close()
    }
}

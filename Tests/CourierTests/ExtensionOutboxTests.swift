@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// `ExtensionOutbox` (an extension's sends) and the app's collection of them, in one process;
/// `ExtensionProcessTests` runs writers and the app as separate processes killed at random.
@Suite struct ExtensionOutboxTests {
    let temporary = TemporaryDirectory()
    var shared: URL { temporary.url.appendingPathComponent("group/ExtensionOutbox") }

    func outbox() throws -> ExtensionOutbox { try ExtensionOutbox(directory: shared, allowingPurgeable: true) }

    func app(_ transport: ScriptedTransport, clock: ManualClock = ManualClock()) async throws -> Courier {
        var configuration = testConfiguration(clock: clock, transport: transport)
        configuration.extensionOutboxDirectory = shared
        let courier = try Courier(directory: temporary.url.appendingPathComponent("app"), configuration: configuration)
        await courier.collectExtensionMessages()  // after the one the open started
        return courier
    }

    @Test func aMessageKeepsItsIdKeyHeadersAndTagsThroughTheOutbox() async throws {
        let transport = ScriptedTransport()
        let courier = try await app(transport)
        courier.pause()
        let id = try outbox().send(
            ["text": "from the share sheet"], to: inbox, orderingKey: "chat", headers: ["X-Source": "share"],
            tags: ["account:1"])
        #expect(await courier.collectExtensionMessages() == 1)
        #expect(await courier.collectExtensionMessages() == 0, "collected once")
        let pending = try #require(await courier.pendingMessages().first)
        #expect(pending.id == id && pending.orderingKey == "chat" && pending.tags == ["account:1"])
        courier.resume()
        try await courier.delivered(id)
        let request = try #require(transport.requests.first)
        #expect(request.headers["Idempotency-Key"] == id.description)
        #expect(request.headers["X-Source"] == "share")
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(String(decoding: request.body, as: UTF8.self) == #"{"text":"from the share sheet"}"#)
        await courier.close()
    }

    @Test func anExtensionsMessageReplacesAndExpiresAsTheAppsOwnWould() async throws {
        let transport = ScriptedTransport { _ in .response(status: 500) }
        let clock = ManualClock()
        let courier = try await app(transport, clock: clock)
        courier.pause()
        let events = EventLog(courier.events())
        let writer = try outbox()
        let stale = try writer.send(["lat": 1], to: inbox, replacing: "location")
        let newest = try writer.send(["lat": 2], to: inbox, replacing: "location", expiry: .seconds(5))
        #expect(await courier.collectExtensionMessages() == 2)
        #expect(await courier.pendingMessages().map(\.id) == [newest], "the first was withdrawn")
        await #expect(throws: CourierError.self) { try await courier.delivered(stale) as ServerAnswer }
        courier.resume()
        await courier.settle()
        await clock.advance(by: .seconds(6))  // past its expiry: the next failure abandons it
        do {
            try await courier.delivered(newest)
            Issue.record("delivered by a server that answers 500")
        } catch let error as CourierError {
            #expect(error.code == .abandoned, "\(error)")
        }
        await courier.close()
        await events.finish()
        #expect(
            events.events.contains {
                if case .abandoned(newest, _, .expired(.seconds(5), _)) = $0 { true } else { false }
            }, "\(events.events)")
    }

    @Test func theAppCollectsWhenItOpensAndWhenItComesToTheForeground() async throws {
        let transport = ScriptedTransport()
        let early = try outbox().send(["n": 1], to: inbox)
        let courier = try await app(transport)
        try await courier.delivered(early)
        let late = try outbox().send(["n": 2], to: inbox)
        courier.appDidEnterForeground()
        #expect(await courier.collectExtensionMessages() == 0, "the foreground's collection took it")
        try await courier.delivered(late)
        await courier.close()
    }

    /// A collection that crashed after claiming a file (or after enqueueing from it) left the
    /// claimed file: the next one adds only what the courier does not know.
    @Test func aClaimLeftByACrashedCollectionIsCollectedOnce() async throws {
        let writer = try outbox()
        let first = try writer.send(["n": 1], to: inbox)
        _ = try OutboxFiles.claim(in: shared.path, fileSystem: PosixFileSystem())  // the crash: claimed, no more
        let second = try writer.send(["n": 2], to: inbox)
        let held = ScriptedTransport()
        held.holdResponses = true  // nothing is delivered: the pending set is what was collected
        let courier = try await app(held)
        #expect(Set(await courier.pendingMessages().map(\.id)) == [first, second])
        // As if the process died after enqueueing but before removing the claim.
        let third = try writer.send(["n": 3], to: inbox)
        let claims = try OutboxFiles.claim(in: shared.path, fileSystem: PosixFileSystem()).directories
        #expect(claims.count == 1)
        let copy = temporary.url.appendingPathComponent("copy").path
        try FileManager.default.copyItem(atPath: claims[0], toPath: copy)
        #expect(await courier.collectExtensionMessages() == 1)
        try FileManager.default.moveItem(atPath: copy, toPath: claims[0])
        #expect(await courier.collectExtensionMessages() == 0, "the same ids are not added twice")
        #expect(Set(await courier.pendingMessages().map(\.id)) == [first, second, third])
        await courier.close()
    }

    /// A kill in the middle of a send leaves a torn record at the end of the writer's file: the
    /// messages before it are collected, the torn one (never acknowledged) is not.
    @Test(arguments: [1, 20, 37, 60])
    func aTornTailLosesOnlyTheSendThatNeverReturned(cutBytes: Int) async throws {
        let writer = try outbox()
        let kept = try (0..<3).map { try writer.send(["n": $0], to: inbox) }
        let writers = OutboxFiles.writersPath(shared.path)
        let file = try #require(try FileManager.default.contentsOfDirectory(atPath: writers).first)
        let path = writers + "/" + file
        let before = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        _ = try writer.send(["n": "torn", "pad": String(repeating: "x", count: 40)], to: inbox)
        let after = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(before + min(cutBytes, after - before - 1)))
        try handle.close()
        let held = ScriptedTransport()
        held.holdResponses = true
        let courier = try await app(held)
        #expect(Set(await courier.pendingMessages().map(\.id)) == Set(kept))
        await courier.close()
    }

    /// Between sends a writer holds no lock, and the app holds none in the shared folder between
    /// collections (`/proc/locks` lists every lock on the machine by inode).
    @Test func idleWritersAndAnIdleAppHoldNoLockInTheSharedFolder() async throws {
        let writer = try outbox()
        _ = try writer.send(["n": 1], to: inbox)
        let inodes = try Self.inodes(under: shared.path)
        #expect(!inodes.isEmpty)
        #expect(try Self.lockedInodes().isDisjoint(with: inodes), "an idle writer holds no lock")
        let courier = try await app(ScriptedTransport())
        _ = try writer.send(["n": 2], to: inbox)
        await courier.collectExtensionMessages()
        #expect(try Self.lockedInodes().isDisjoint(with: Self.inodes(under: shared.path)), "nor an idle app")
        await courier.close()
    }

    /// Threads of two extensions send while the app collects in a loop: every message sent is
    /// collected exactly once.
    @Test(.timeLimit(.minutes(1)))
    func writersSendingWhileTheAppCollectsLoseNothingAndAddNothingTwice() async throws {
        let held = ScriptedTransport()
        held.holdResponses = true
        let courier = try await app(held)
        let outboxes = try [outbox(), outbox()]
        let sent = Locked<[MessageID]>([])
        let group = DispatchGroup()
        for t in 0..<4 {
            group.enter()
            Thread {
                // Bounded: 100 sends per thread.
                for n in 0..<100 {
                    guard let id = try? outboxes[t % 2].send(["t": t, "n": n], to: inbox) else { continue }
                    sent.withLock { $0.append(id) }
                }
                group.leave()
            }.start()
        }
        var collected = 0
        // Bounded: the writers finish within the time limit; each turn collects once.
        while group.wait(timeout: .now()) == .timedOut {
            collected += await courier.collectExtensionMessages()
        }
        collected += await courier.collectExtensionMessages()
        let ids = sent.withLock { $0 }
        #expect(ids.count == 400)
        // A file a writer held was skipped, and claimed by a collection of its own a moment later.
        #expect(collected <= 400)
        for _ in 0..<100 where courier.pendingCount < 400 { await courier.collectExtensionMessages() }
        #expect(Set(await courier.pendingMessages().map(\.id)) == Set(ids))
        await courier.close()
    }

    /// The wake's name is the system-wide Darwin center's: one per folder, so two outboxes of
    /// one group do not wake each other's couriers, and the same folder however it is spelled.
    @Test func theWakeIsNamedForItsFolderOnly() {
        let group = URL(fileURLWithPath: "/var/mobile/Containers/Shared/AppGroup/ABC")
        let name = ExtensionWake.name(for: group.appendingPathComponent("Outbox"))
        #expect(name.hasPrefix("courier.extension-outbox."))
        #expect(name == ExtensionWake.name(for: group.appendingPathComponent("x/../Outbox")))
        #expect(name == ExtensionWake.name(for: URL(fileURLWithPath: group.path + "/Outbox/")))
        #expect(name != ExtensionWake.name(for: group.appendingPathComponent("Outbox2")))
        let otherGroup = URL(fileURLWithPath: "/var/mobile/Containers/Shared/AppGroup/ABD")
        #expect(name != ExtensionWake.name(for: otherGroup.appendingPathComponent("Outbox")))
    }

    @Test func anOutboxInTmpOrCachesIsRefused() {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("outbox")
        #expect { try ExtensionOutbox(directory: directory) } throws: {
            ($0 as? CourierError)?.code == .unsuitableDirectory
        }
    }

    /// The inodes of every file under `path`.
    static func inodes(under path: String) throws -> Set<UInt64> {
        var found: Set<UInt64> = []
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let relative = enumerator?.nextObject() as? String {
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + relative)
            if let inode = attributes[.systemFileNumber] as? UInt64 { found.insert(inode) }
            if let inode = attributes[.systemFileNumber] as? Int { found.insert(UInt64(inode)) }
        }
        return found
    }

    /// The inodes `/proc/locks` lists (`1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF`).
    static func lockedInodes() throws -> Set<UInt64> {
        let text = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        return Set(
            text.split(separator: "\n").compactMap { line in
                let fields = line.split(separator: " ")
                guard fields.count > 5 else { return nil }
                return fields[5].split(separator: ":").last.flatMap { UInt64($0) }
            })
    }
}

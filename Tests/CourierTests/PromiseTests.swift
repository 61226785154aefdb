@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// Every promise of `send`, each with the defect it once had (issue 7).
@Suite struct ConfigurationValidationTests {
    /// The configuration of issue 7's loss: 64 KiB segments with the default 1 MiB message
    /// limit. It is refused at `init`, naming both settings, instead of losing messages later.
    @Test func aMessageLimitThatCannotFitASegmentIsRefusedNamingTheConflict() throws {
        var c = Courier.Configuration()
        c.allowsPurgeableDirectory = true
        c.segmentSizeBytes = 65_536
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        #expect { try Courier(directory: scratch.url, configuration: c) } throws: { error in
            guard let e = error as? CourierError, e.code == .invalidConfiguration else { return false }
            return e.message.contains("maximumMessageBytes") && e.message.contains("segmentSizeBytes")
        }
        #expect(c.problems.count == 1)
        c.maximumMessageBytes = 60_000
        #expect(c.problems.isEmpty)
    }

    @Test func everyOutOfRangeSettingIsNamed() {
        var c = Courier.Configuration()
        c.allowsPurgeableDirectory = true
        c.maximumConcurrentDeliveries = 0
        c.requestTimeout = .zero
        c.segmentSizeBytes = 100
        c.maximumStorageBytes = 150
        c.compactionThreshold = 0
        c.retry.multiplier = 0.5
        c.retry.maximumAttempts = 0
        c.destinationBackoff.failuresBeforeDown = 0  // the init's precondition does not see a later set
        let text = c.problems.joined(separator: "\n")
        for name in ["maximumConcurrentDeliveries", "requestTimeout", "segmentSizeBytes", "maximumStorageBytes",
                     "compactionThreshold", "retry.multiplier", "retry.maximumAttempts",
                     "destinationBackoff.failuresBeforeDown"] {
            #expect(text.contains(name), "\(name) missing from: \(text)")
        }
        #expect(Courier.Configuration().problems.isEmpty, "the defaults are valid")
    }

    /// A body within `maximumMessageBytes` whose URL and headers make its record too big for a
    /// segment is refused with `.messageTooLarge`, and nothing is written.
    @Test func aMessageWhoseHeadersMakeItTooBigForASegmentIsRefused() async throws {
        let dir = TemporaryDirectory()
        var c = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        c.segmentSizeBytes = 4096
        c.maximumMessageBytes = 3000
        c.maximumStorageBytes = 1 << 20
        let courier = try Courier(directory: dir.url, configuration: c)
        let body = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
        let headers = ["X-Padding": String(repeating: "p", count: 2000)]
        #expect { try courier.send(data: body, contentType: "application/octet-stream", to: inbox, headers: headers) }
            throws: { ($0 as? CourierError)?.code == .messageTooLarge }
        try courier.send(data: body, contentType: "application/octet-stream", to: inbox)
        #expect(courier.pendingCount == 1)
        await courier.close()
    }
}

@Suite struct AlwaysDurabilityTests {
    /// A message dropped after a failed fsync was the only pending one: whoever waited for an
    /// idle courier, or for that message, while its fsync ran is told at once (a review found
    /// them left hanging).
    @Test(.timeLimit(.minutes(1)))
    func discardingTheOnlyPendingMessageReleasesItsWaiters() async throws {
        let fs = SimulatedFileSystem()
        let courier = try openForPowerCut(fs, .always)
        fs.pauseSyncs()
        let sent = Task {
            await onThread { Result { () throws(CourierError) in try courier.send(["n": 1], to: inbox) } }
        }
        try #require(await fs.waitForAPausedSync())
        let id = try #require(courier.core.pendingIDs.first)
        let idle = Task { await courier.waitUntilIdle() }
        let delivered = Task { try await courier.delivered(id) }
        for _ in 0..<2_000 where courier.core.diagnostics.waiters < 2 {
            try await Task.sleep(for: .milliseconds(1))
        }
        fs.inject(.error(5), on: .sync)
        fs.resumeSyncs()
        await idle.value
        let outcome = await delivered.result
        guard case .failure(let error) = outcome else { Issue.record("delivered(_:) returned"); return }
        #expect((error as? CourierError)?.code == .storageFailed)
        guard case .failure(let thrown) = await sent.value else { Issue.record("the send returned"); return }
        #expect(thrown.code == .storageFailed && thrown.messageID == id)
        #expect(courier.pendingCount == 0)
        await courier.close()
    }

    /// With `.always`, a failed fsync makes `send` throw `.storageFailed` carrying the id, and
    /// this Courier never delivers that message: no request, no event, no callback. (It used
    /// to throw and deliver anyway, callbacks included.)
    @Test func aFailedFsyncIsAThrownSendThatIsNeverDelivered() async throws {
        let fs = SimulatedFileSystem()
        let clock = ManualClock()
        let transport = ScriptedTransport()
        var config = testConfiguration(clock: clock, transport: transport)
        config.fileSystem = fs
        config.durability = .always
        let courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        let events = EventLog(courier.events())
        let called = Counter()
        fs.inject(.error(5), on: .sync)
        // (A `Result`, not `do`/`catch`: Swift 6.3 crashes compiling the latter here.)
        let result = Result { () throws(CourierError) -> MessageID in
            try courier.send(["n": 1], to: inbox, onDelivered: { _ in called.increment() },
                             onAbandoned: { _, _ in called.increment() })
        }
        let thrown: CourierError? = if case .failure(let e) = result { e } else { nil }
        #expect(thrown?.code == .storageFailed)
        let id = try #require(thrown?.messageID)
        #expect(courier.pendingCount == 0)
        await courier.settle()
        await clock.advance(by: .seconds(600))
        await courier.settle()
        #expect(transport.requests.isEmpty)
        #expect(called.value == 0)
        await courier.close()
        await events.finish()
        #expect(!events.events.contains(.enqueued(id)))
        // The log failed with the fsync: later sends say so instead of pretending.
        #expect { try courier.send(["n": 2], to: inbox) } throws: { ($0 as? CourierError) != nil }
    }

    /// A successful `.always` send is delivered, with its event and callback, as before.
    @Test func aSuccessfulFsyncReleasesTheMessageToDelivery() async throws {
        let fs = SimulatedFileSystem()
        let transport = ScriptedTransport()
        var config = testConfiguration(clock: ManualClock(), transport: transport)
        config.fileSystem = fs
        config.durability = .always
        let courier = try Courier(directory: URL(fileURLWithPath: "/c"), configuration: config)
        let called = Counter()
        let id = try courier.send(["n": 1], to: inbox, onDelivered: { _ in called.increment() })
        try await courier.delivered(id)
        #expect(transport.requests.count == 1)
        await courier.close()
        #expect(called.value == 1)
    }
}

@Suite struct TransportOwnershipTests {
    @Test func closeNeverShutsDownATransportTheAppInjected() async throws {
        let transport = ScriptedTransport()
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        await courier.close()
        #expect(transport.shutdownCount == 0)
    }
}

@Suite struct HeaderPolicyTests {
    @Test func reservedHeadersAreRefusedNotDropped() async throws {
        let transport = ScriptedTransport()
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        for name in ["Content-Type", "content-type", "Idempotency-Key", "IDEMPOTENCY-KEY"] {
            #expect { try courier.send(["a": 1], to: inbox, headers: [name: "x"]) }
                throws: { ($0 as? CourierError)?.code == .invalidHeaders }
            #expect { try courier.send(data: Data(), contentType: "text/plain", to: inbox, headers: [name: "x"]) }
                throws: { ($0 as? CourierError)?.code == .invalidHeaders }
        }
        #expect { try courier.send(data: Data(), contentType: "", to: inbox) }
            throws: { ($0 as? CourierError)?.code == .invalidHeaders }
        #expect(courier.pendingCount == 0)
        let id = try courier.send(data: Data("a,b".utf8), contentType: "text/csv", to: inbox)
        try await courier.delivered(id)
        #expect(transport.requests.first?.headers["Content-Type"] == "text/csv")
        await courier.close()
    }
}


@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierLogTesting
import CourierTesting
import Foundation
import Testing

/// The platform-neutral halves of what the iOS lifecycle wiring does on a device (issue 23):
/// opening before the first unlock (A4), path updates that are not a recovery (A7), and what
/// a screen and an alert read (a list with the events after it, an error's description).
@Suite(.timeLimit(.minutes(1))) struct DeviceLifecycleTests {
    @Test func onlyANetworkThatComesBackIsARecovery() {
        var recovery = NetworkRecovery()
        // The first report when the monitor starts, a handover from Wi-Fi to cellular, a flag
        // change: each satisfied, none a recovery. Then the network goes, and comes back; a
        // VPN on demand that needs a connection, then is up again, is no recovery either.
        let updates: [NetworkRecovery.Status] = [.satisfied, .satisfied, .satisfied, .unsatisfied, .unsatisfied,
                                                 .satisfied, .satisfied, .requiresConnection, .satisfied,
                                                 .unsatisfied, .satisfied]
        let recoveries = updates.map { recovery.isRecovery($0) }
        #expect(recoveries == [false, false, false, false, false, true, false, false, false, false, true])
    }

    /// A log whose files iOS keeps locked until the first unlock (EPERM when it reads them).
    static func lockedLog() async throws -> (SimulatedFileSystem, Courier.Configuration, URL) {
        let fileSystem = SimulatedFileSystem()
        var configuration = testConfiguration(clock: ManualClock(), transport: ScriptedTransport())
        configuration.fileSystem = fileSystem
        configuration.hasDataProtection = true
        let directory = URL(fileURLWithPath: "/app/outbox")
        let courier = try Courier(directory: directory, configuration: configuration)
        _ = try courier.send(["text": "before the restart"], to: inbox)
        await courier.close()
        return (fileSystem, configuration, directory)
    }

    @Test func aLogLockedBeforeTheFirstUnlockIsNamedAsSuch() async throws {
        let (fileSystem, configuration, directory) = try await Self.lockedLog()
        fileSystem.inject(.error(EPERM), on: .read)
        #expect(throws: CourierError.self) { try Courier(directory: directory, configuration: configuration) }
        fileSystem.inject(.error(EPERM), on: .read)
        do {
            _ = try Courier(directory: directory, configuration: configuration)
        } catch {
            #expect(error.code == .protectedDataUnavailable)
            #expect(error.localizedDescription.contains("unlocked"), "an alert shows the message")
        }
        var linux = configuration
        linux.hasDataProtection = false
        fileSystem.clearFaults()
        fileSystem.inject(.error(EPERM), on: .read)
        do {
            _ = try Courier(directory: directory, configuration: linux)
            Issue.record("opened a log that could not be read")
        } catch {
            #expect(error.code == .storageFailed, "without data protection, a refusal is an I/O error")
        }
    }

    @Test func openingWaitsForProtectedDataThenOpens() async throws {
        var (fileSystem, configuration, directory) = try await Self.lockedLog()
        let held = ScriptedTransport()
        held.holdResponses = true  // nothing is delivered before the test counts
        configuration.transport = held
        fileSystem.inject(.error(EPERM), on: .read)
        fileSystem.inject(.error(EPERM), on: .read)
        let unlocked = OneShotSignal()
        let waiting = OneShotSignal()
        let waits = Counter()
        let opening = Task { [configuration] in
            try await Courier.open(directory: directory, configuration: configuration, waitingForProtectedData: {
                waits.increment()
                waiting.fire()
                return await unlocked.wait()
            })
        }
        _ = await waiting.wait()
        #expect(waits.value == 1, "refused once, then waiting")
        unlocked.fire()  // protectedDataDidBecomeAvailable
        let courier = try await opening.value
        #expect(waits.value == 2, "the notification raced the second open: it waited again, then opened")
        #expect(await courier.pendingMessages().count == 1, "nothing sent before the restart was lost")
        await courier.close()
    }

    @Test func openingStopsWaitingWhenItsTaskIsCancelled() async throws {
        let (fileSystem, configuration, directory) = try await Self.lockedLog()
        fileSystem.inject(.error(EPERM), on: .read)
        let never = OneShotSignal()
        let opening = Task {
            try await Courier.open(directory: directory, configuration: configuration,
                                   waitingForProtectedData: { await never.wait() })
        }
        opening.cancel()
        do {
            _ = try await opening.value
            Issue.record("opened a locked log")
        } catch {
            #expect((error as? CourierError)?.code == .protectedDataUnavailable)
        }
    }

    @Test func anyOtherFailureIsThrownWithoutWaiting() async throws {
        let (fileSystem, configuration, directory) = try await Self.lockedLog()
        fileSystem.inject(.error(EIO), on: .read)
        let waits = Counter()
        do {
            _ = try await Courier.open(directory: directory, configuration: configuration,
                                       waitingForProtectedData: { waits.increment(); return true })
            Issue.record("opened a log that could not be read")
        } catch {
            #expect(error.code == .storageFailed)
        }
        #expect(waits.value == 0)
    }

    /// A screen lists the pending messages, then follows their events: a delivery between the
    /// two is in the stream, never lost between them.
    @Test func theListAndTheEventsAfterItMissNothing() async throws {
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let scratch = TemporaryDirectory()  // kept for the test: its deinit removes the folder
        let courier = try Courier(directory: scratch.url,
                                  configuration: testConfiguration(clock: ManualClock(), transport: transport))
        let id = try courier.send(["text": "hi"], to: inbox)
        await transport.waitForRequests(1)
        let (pending, events) = await courier.pendingMessagesAndEvents()
        #expect(pending.map(\.id) == [id])
        transport.release()  // delivered after the list was taken
        var iterator = events.makeAsyncIterator()
        var delivered = false
        for _ in 0..<10 where !delivered {
            if case .delivered(id, _)? = await iterator.next() { delivered = true }
        }
        #expect(delivered)
        await courier.close()
    }
}

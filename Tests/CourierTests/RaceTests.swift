@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// Many threads call `send` while the engine delivers, another thread keeps compacting the
/// 4 KiB segments and, halfway through, another task calls `close()`. Run it under ThreadSanitizer with
/// `make tsan`. What must hold whatever the interleaving: every `send` either returned an id or
/// threw `.closed`; every id returned was delivered or is pending after reopening; nothing that
/// was never acknowledged comes back.
@Suite struct RaceTests {
    static let threads = 8
    static let sendsPerThread = 300

    /// Deterministic per request: about a quarter of the messages fail their first attempt.
    static func answer(_ request: DeliveryRequest) -> Int {
        request.attempt == 1 && "0123".contains(request.messageID.description.last!) ? 500 : 200
    }

    @Test(.timeLimit(.minutes(2)))
    func sendFromManyThreadsWhileDeliveringCompactingAndClosing() async throws {
        let dir = TemporaryDirectory()
        let transport = ScriptedTransport { .response(status: RaceTests.answer($0)) }
        var config = Courier.Configuration()
        config.useSmallestSegments()
        config.allowsPurgeableDirectory = true
        config.transport = transport
        config.maximumConcurrentDeliveries = 4
        config.retry = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(4))
        let courier = try Courier(directory: dir.url, configuration: config)
        let outcome = SendOutcomes()
        let closeAfter = Self.threads * Self.sendsPerThread / 2

        let group = DispatchGroup()
        group.enter()
        Thread {
            // Compactions back to back while the senders run, paced by 0.2 ms (one returns at
            // once while there is nothing to compact): bounded by 100,000 turns. The first one
            // that succeeds lets the senders past their halfway barrier.
            var released = false
            for _ in 0..<100_000 where !outcome.sendersDone {
                courier.compactNowForTesting()
                if !released && courier.compactionCount > 0 {
                    released = true
                    for _ in 0..<Self.threads { outcome.firstCompaction.signal() }
                }
                usleep(200)
            }
            group.leave()
        }.start()
        for t in 0..<Self.threads {
            group.enter()
            let thread = Thread {
                // Bounded: sendsPerThread turns.
                for i in 0..<Self.sendsPerThread {
                    if i == Self.sendsPerThread / 2 {
                        // Halfway, wait (at most 30 s) for the compactor thread to have finished
                        // a compaction, so the second half overlaps compactions for certain.
                        _ = outcome.firstCompaction.wait(timeout: .now() + 30)
                    }
                    do {
                        let id = try courier.send(["thread": t, "n": i], to: inbox)
                        // Close once half the sends are in and the compactor has finished at
                        // least one compaction (the senders go on, and get `.closed`).
                        if outcome.acknowledge(id) >= closeAfter && courier.compactionCount > 0 {
                            outcome.closeOnce { Task { await courier.close() } }
                        }
                    } catch {
                        outcome.refuse(error)
                    }
                }
                if outcome.senderFinished() == Self.threads { outcome.sendersDone = true }
                group.leave()
            }
            thread.start()
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            group.notify(queue: .global()) { done.resume() }
        }
        let closedWhileSending = outcome.closing != nil
        outcome.closeOnce { Task { await courier.close() } }
        await outcome.closing?.value
        let compactions = courier.compactionCount

        #expect(outcome.unexpected.isEmpty, "sends failed otherwise than .closed: \(outcome.unexpected.prefix(3))")
        #expect(outcome.acknowledged.count >= closeAfter, "close came after \(closeAfter) acknowledged sends")
        #expect(compactions > 0, "the compactor ran while sends and deliveries went on")
        #expect(closedWhileSending, "close() came while threads were still sending")

        let delivered = Set(transport.requests.filter { Self.answer($0) == 200 }.map(\.messageID))
        let (pending, isClean, summary) = try await pendingAfterReopen(dir.url, config)
        let acknowledged = Set(outcome.acknowledged)
        let lost = acknowledged.filter { !delivered.contains($0) && !pending.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) acknowledged messages neither delivered nor pending")
        #expect(pending.isSubset(of: acknowledged), "only acknowledged messages come back")
        #expect(isClean, "\(summary)")
        print("""
            race: \(Self.threads) threads, \(outcome.acknowledged.count) sends acknowledged, \
            the rest refused as closed; \
            \(compactions) compactions meanwhile; \(delivered.intersection(acknowledged).count) delivered, \
            \(pending.count) pending after reopen, \(lost.count) lost
            """)
    }
}

/// What the sending threads saw, under a lock.
final class SendOutcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [MessageID] = []
    private var others: [String] = []
    private var closeTask: Task<Void, Never>?

    /// Records an acknowledged send; returns how many there are now.
    func acknowledge(_ id: MessageID) -> Int { lock.withLock { ids.append(id); return ids.count } }

    func refuse(_ error: any Error) {
        guard (error as? CourierError)?.code != .closed else { return }
        lock.withLock { others.append("\(error)") }
    }

    var acknowledged: [MessageID] { lock.withLock { ids } }
    var unexpected: [String] { lock.withLock { others } }
    private var finished = 0
    let firstCompaction = DispatchSemaphore(value: 0)
    private var done = false

    var closing: Task<Void, Never>? { lock.withLock { closeTask } }

    /// Starts the close task unless one was started already.
    func closeOnce(_ start: () -> Task<Void, Never>) {
        lock.withLock { if closeTask == nil { closeTask = start() } }
    }

    /// A sending thread is done; returns how many are.
    func senderFinished() -> Int { lock.withLock { finished += 1; return finished } }

    var sendersDone: Bool {
        get { lock.withLock { done } }
        set { lock.withLock { done = newValue } }
    }
}

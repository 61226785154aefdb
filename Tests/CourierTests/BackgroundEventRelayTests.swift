@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// The neutral half of the iOS background session's delegate: completions reach the courier
/// even when they come before it listens, and the system is answered only after every
/// completion of the batch was handled and the courier handed off.
@Suite(.timeLimit(.minutes(1))) struct BackgroundEventRelayTests {
    final class Journal: @unchecked Sendable {
        let lock = NSLock()
        var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    static func completion(_ n: Int,
                           _ outcome: DeliveryOutcome = .response(status: 200)) -> BackgroundUploadCompletion {
        BackgroundUploadCompletion(task: BackgroundUploadTask(identifier: n, taskDescription: "t\(n)"),
                                   outcome: outcome)
    }

    @Test func completionsBeforeTheCourierListensAreHeldThenHeard() async {
        let journal = Journal()
        let relay = BackgroundEventRelay(callOnMain: { $0() })
        relay.completed(Self.completion(1))
        relay.completed(Self.completion(2))
        #expect(relay.heldCount == 2)
        relay.setHandler { journal.add("heard \($0.task.identifier)") }
        await relay.waitForHandlers()
        #expect(relay.heldCount == 0)
        #expect(Set(journal.all) == ["heard 1", "heard 2"])
    }

    @Test func theSystemIsAnsweredAfterEveryCompletionWasHandledAndTheHandOff() async {
        let journal = Journal()
        let relay = BackgroundEventRelay(callOnMain: { journal.add("main"); $0() })
        let gate = AsyncGate()
        relay.setHandler { completion in
            await gate.wait()
            journal.add("heard \(completion.task.identifier)")
        }
        relay.eventsFinished = { journal.add("handed off") }
        relay.completed(Self.completion(1))
        relay.storeSystemCompletionHandler { journal.add("answered") }
        relay.didFinishEvents()
        await Task.yield()
        #expect(!journal.all.contains("answered"), "a completion is still being handled")
        await gate.open()
        await relay.waitForHandlers()
        for _ in 0..<100 where !journal.all.contains("answered") { await Task.yield() }
        #expect(journal.all == ["heard 1", "handed off", "main", "answered"])
    }

    @Test func aHandlerStoredAfterTheBatchFinishedIsStillCalled() async {
        let journal = Journal()
        let relay = BackgroundEventRelay(callOnMain: { $0() })
        relay.setHandler { _ in }
        relay.didFinishEvents()
        await relay.waitForEvents()  // SwiftUI's background task: returns once answered
        journal.add("returned")
        #expect(journal.all == ["returned"])
    }

    @Test func heldCompletionsKeepTheSystemWaitingUntilACourierHearsThem() async {
        let journal = Journal()
        let relay = BackgroundEventRelay(callOnMain: { $0() })
        relay.completed(Self.completion(1))
        relay.didFinishEvents()
        relay.storeSystemCompletionHandler { journal.add("answered") }
        for _ in 0..<50 { await Task.yield() }
        #expect(journal.all.isEmpty, "a completion nobody logged yet")
        relay.setHandler { journal.add("heard \($0.task.identifier)") }
        for _ in 0..<200 where !journal.all.contains("answered") { await Task.yield() }
        #expect(journal.all == ["heard 1", "answered"])
    }

    @Test func aSlowHandOffDoesNotKeepTheSystemWaitingPastTheLimit() async {
        let journal = Journal()
        let clock = ManualClock()
        let relay = BackgroundEventRelay(clock: clock, callOnMain: { $0() })
        let gate = AsyncGate()
        relay.setHandler { _ in }
        relay.eventsFinished = { await gate.wait() }  // never ends on its own
        relay.didFinishEvents()
        relay.storeSystemCompletionHandler { journal.add("answered") }
        // The answer's deadline, and the limit on the hand-off.
        for _ in 0..<1_000 where clock.sleeperCount < 2 { await Task.yield() }
        await clock.advance(by: BackgroundEventRelay.eventsFinishedLimit - .seconds(1))
        #expect(journal.all.isEmpty)
        await clock.advance(by: .seconds(1))
        for _ in 0..<200 where !journal.all.contains("answered") { await Task.yield() }
        #expect(journal.all == ["answered"])
        await gate.open()
    }

    /// The open failed, or this version of the app no longer configures background uploads:
    /// no courier will ever hear the held completions, and the system is answered anyway.
    @Test func theSystemIsAnsweredAtTheLimitWhenNoCourierListens() async {
        let journal = Journal()
        let clock = ManualClock()
        let relay = BackgroundEventRelay(clock: clock, callOnMain: { $0() })
        relay.completed(Self.completion(1))
        relay.didFinishEvents()
        relay.storeSystemCompletionHandler { journal.add("answered") }
        for _ in 0..<200 where clock.sleeperCount == 0 { await Task.yield() }
        await clock.advance(by: BackgroundEventRelay.answerLimit - .seconds(1))
        #expect(journal.all.isEmpty, "the courier may still open")
        await clock.advance(by: .seconds(1))
        for _ in 0..<200 where journal.all.isEmpty { await Task.yield() }
        #expect(journal.all == ["answered"])
        #expect(relay.heldCount == 1, "held for the next open, which reconciles the task")
    }

    @Test func aHandlerThatNeverReturnsDoesNotKeepTheSystemWaitingPastTheLimit() async {
        let journal = Journal()
        let clock = ManualClock()
        let relay = BackgroundEventRelay(clock: clock, callOnMain: { $0() })
        let gate = AsyncGate()
        relay.setHandler { _ in await gate.wait() }  // hangs
        relay.completed(Self.completion(1))
        relay.didFinishEvents()
        await relay.waitForEventsOrLimit(clock: clock, journal: journal)
        #expect(journal.all == ["answered"])
        await gate.open()
    }

    @Test func theSwiftUIWaitReturnsAtTheLimitWhenNoCourierListens() async {
        let clock = ManualClock()
        let relay = BackgroundEventRelay(clock: clock, callOnMain: { $0() })
        relay.completed(Self.completion(1))
        relay.didFinishEvents()
        let waiting = Task { await relay.waitForEvents() }
        for _ in 0..<200 where clock.sleeperCount == 0 { await Task.yield() }
        await clock.advance(by: BackgroundEventRelay.answerLimit)
        await waiting.value  // returns: the test's time limit would catch a wait that does not
    }

    @Test func eventsOfASessionCourierDidNotNameAreLeftToTheApp() async {
        let journal = Journal()
        let identifier = "com.example.relay-tests.\(UUID())"
        #expect(!BackgroundEventRelay.storeSystemCompletionHandler(forSession: identifier) {
            journal.add("answered by Courier")
        })
        await BackgroundEventRelay.waitForEvents(forSession: identifier)  // returns at once
        let relay = BackgroundEventRelay.named(identifier, callOnMain: { $0() })
        #expect(BackgroundEventRelay.named(identifier, callOnMain: { $0() }) === relay, "one relay per session")
        relay.setHandler { _ in }
        relay.didFinishEvents()
        #expect(BackgroundEventRelay.storeSystemCompletionHandler(forSession: identifier) {
            journal.add("answered by Courier")
        })
        for _ in 0..<200 where journal.all.isEmpty { await Task.yield() }
        #expect(journal.all == ["answered by Courier"])
    }

    @Test func anUploadExpectsItsBodyItsHeadersAndRoomForTheSystems() {
        let request = BackgroundUploadRequest(url: URL(string: "https://example.com/in")!,
                                              headers: ["Idempotency-Key": "k"],
                                              bodyFile: URL(fileURLWithPath: "/b"), bodyByteCount: 1000,
                                              earliestBeginDate: Date(), taskDescription: "t")
        #expect(request.expectedBytesToSend == 1000 + 22 + (15 + 1 + 4) + 512)
        #expect(request.mayUse(cellular: true, expensive: true, constrained: true), "every network by default")
    }

    @Test func aRedirectedUploadIsAFailureWhateverItWasAnswered() {
        let outcome = BackgroundUploadCompletion.outcome(
            statusCode: 200, retryAfter: nil, error: nil,
            requestedURL: URL(string: "https://example.com/in")!, finalURL: URL(string: "https://elsewhere.example/")!)
        #expect(!outcome.isSuccess)
        let same = BackgroundUploadCompletion.outcome(statusCode: 200, retryAfter: nil, error: nil,
                                                      requestedURL: URL(string: "https://example.com/in")!,
                                                      finalURL: URL(string: "https://example.com/in")!)
        #expect(same.isSuccess)
    }

    @Test func theDelegatesOutcomeIsClassifiedAsATransportWould() {
        #expect(BackgroundUploadCompletion.outcome(statusCode: 503, retryAfter: "30", error: nil)
                == .response(status: 503, retryAfter: "30"))
        #expect(BackgroundUploadCompletion.outcome(statusCode: 200, retryAfter: nil, error: nil).isSuccess)
        let cancelled = BackgroundUploadCompletion.outcome(statusCode: nil, retryAfter: nil,
                                                           error: URLError(.cancelled))
        #expect(cancelled
                == .failure(TransportFailure(.cancelled, URLSessionTransport.classify(URLError(.cancelled)).message)))
        if case .failure(let f) = BackgroundUploadCompletion.outcome(statusCode: nil, retryAfter: nil,
                                                                     error: URLError(.timedOut)) {
            #expect(f.kind == .timeout)
        } else {
            Issue.record("a timeout is a failure")
        }
        if case .failure(let f) = BackgroundUploadCompletion.outcome(statusCode: nil, retryAfter: nil, error: nil) {
            #expect(f.kind == .other)
        } else {
            Issue.record("no response is a failure")
        }
    }
}

extension BackgroundEventRelay {
    /// Stores a system handler that journals "answered", then advances `clock` to the limit.
    func waitForEventsOrLimit(clock: ManualClock, journal: BackgroundEventRelayTests.Journal) async {
        storeSystemCompletionHandler { journal.add("answered") }
        for _ in 0..<200 where clock.sleeperCount < 2 { await Task.yield() }
        await clock.advance(by: BackgroundEventRelay.answerLimit)
        for _ in 0..<200 where journal.all.isEmpty { await Task.yield() }
    }
}

/// Opens once; every waiter before and after goes on.
actor AsyncGate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
    func open() {
        isOpen = true
        for w in waiters { w.resume() }
        waiters.removeAll()
    }
}

@testable import Courier
import CourierLog
import CourierTesting
import Foundation
import Testing

func state(_ n: Int, url: String = "https://example.com/a", due: UInt64 = 1000, attempts: UInt32 = 0) -> MessageState {
    let id = MessageID("00000000-0000-0000-0000-\(String(repeating: "0", count: 12 - String(n).count))\(n)")!
    return MessageState(id: id, url: url, headers: [Header(name: "Content-Type", value: "application/json")],
                        body: Array(#"{"n":\#(n)}"#.utf8), createdMilliseconds: 500, attempts: attempts, nextDueMilliseconds: due)
}

@Suite struct EventCodecTests {
    static let samples: [Event] = [
        .enqueued(state(1)),
        .snapshot(state(2, attempts: 7)),
        .attempted(state(1).id, attempt: 3, outcome: .response(status: 503, retryAfter: "120"), nextDueMilliseconds: 99),
        .attempted(state(1).id, attempt: 4, outcome: .failure(TransportFailure(.connectionClosed, "reset")), nextDueMilliseconds: 100),
        .delivered(state(1).id, attempt: 5, status: 201),
        .abandoned(state(2).id, attempt: 9, reason: "HTTP 404"),
    ]

    @Test func everyEventSurvivesEncodeAndDecode() {
        for event in Self.samples {
            #expect(Event.decode(kind: event.kind, body: event.encoded()) == event)
            #expect(Event.messageID(in: event.encoded()) == event.id)
        }
    }

    @Test func truncatedOrExtendedBodiesDecodeToNothingAndNeverTrap() {
        for event in Self.samples {
            let bytes = event.encoded()
            for n in 0..<bytes.count { #expect(Event.decode(kind: event.kind, body: Array(bytes.prefix(n))) == nil) }
            #expect(Event.decode(kind: event.kind, body: bytes + [0]) == nil)
        }
        let random = SeededRandomSource(seed: 9)
        for _ in 0..<2000 {
            let bytes = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            for kind in 0...6 { _ = Event.decode(kind: RecordKind(rawValue: UInt8(kind)), body: [1] + bytes) }
        }
    }
}

@Suite struct SchedulerTests {
    @Test func theLastFullStateWinsAndLaterDeltasApply() {
        var s = Scheduler(fifoPerDestination: false)
        s.apply(.enqueued(state(1, due: 10)), sequence: 1)
        s.apply(.attempted(state(1).id, attempt: 1, outcome: .response(status: 500), nextDueMilliseconds: 20), sequence: 2)
        s.apply(.snapshot(state(1, due: 20, attempts: 1)), sequence: 3)
        s.apply(.attempted(state(1).id, attempt: 2, outcome: .response(status: 500), nextDueMilliseconds: 40), sequence: 4)
        #expect(s.entries[state(1).id]?.state.attempts == 2)
        #expect(s.entries[state(1).id]?.state.nextDueMilliseconds == 40)
        #expect(s.entries[state(1).id]?.fullStateSequence == 3)
    }

    @Test func deltasOfUnknownIdsAreIgnoredAndResolvedMessagesStayResolved() {
        var s = Scheduler(fifoPerDestination: false)
        #expect(s.apply(.attempted(state(5).id, attempt: 1, outcome: .response(status: 500), nextDueMilliseconds: 1), sequence: 1) == .ignored)
        #expect(s.apply(.delivered(state(5).id, attempt: 1, status: 200), sequence: 2) == .ignored)
        s.apply(.enqueued(state(1)), sequence: 3)
        #expect(s.apply(.delivered(state(1).id, attempt: 1, status: 200), sequence: 4) == .ended)
        #expect(s.apply(.attempted(state(1).id, attempt: 2, outcome: .response(status: 500), nextDueMilliseconds: 1), sequence: 5) == .ignored)
        #expect(s.isEmpty)
    }

    @Test func dueMessagesComeOutInDueOrderAndNotBeforeTheirTime() {
        var s = Scheduler(fifoPerDestination: false)
        for (n, due) in [(1, 300), (2, 100), (3, 200)] { s.apply(.enqueued(state(n, due: UInt64(due))), sequence: UInt64(n)) }
        #expect(s.takeDue(nowMilliseconds: 99) == nil)
        #expect(s.earliestDue() == 100)
        #expect(s.takeDue(nowMilliseconds: 1000)?.id == state(2).id)
        #expect(s.takeDue(nowMilliseconds: 1000)?.id == state(3).id)
        #expect(s.takeDue(nowMilliseconds: 1000)?.id == state(1).id)
        #expect(s.takeDue(nowMilliseconds: 1000) == nil, "all three are in flight")
        s.retry(state(2).id, attempts: 1, dueMilliseconds: 5000)
        #expect(s.earliestDue() == 5000)
    }

    @Test func fifoPerDestinationReleasesTheNextOnlyWhenTheHeadIsDone() {
        var s = Scheduler(fifoPerDestination: true)
        s.apply(.enqueued(state(1, url: "https://a.example/x", due: 100)), sequence: 1)
        s.apply(.enqueued(state(2, url: "https://a.example/x", due: 0)), sequence: 2)
        s.apply(.enqueued(state(3, url: "https://b.example/y", due: 50)), sequence: 3)
        #expect(s.takeDue(nowMilliseconds: 1000)?.id == state(3).id)
        #expect(s.takeDue(nowMilliseconds: 1000)?.id == state(1).id, "2 is due earlier but waits behind 1")
        #expect(s.takeDue(nowMilliseconds: 1000) == nil)
        s.retry(state(1).id, attempts: 1, dueMilliseconds: 2000)
        #expect(s.takeDue(nowMilliseconds: 1500) == nil, "1 failed and is not due; 2 still waits")
        s.remove(state(1).id)
        #expect(s.takeDue(nowMilliseconds: 1500)?.id == state(2).id)
    }
}

@testable @_spi(CourierTesting) import CourierKit
import Testing

/// A subscriber's buffer: a reader that falls behind is told, exactly where, how many events it
/// lost, instead of going silently stale.
@Suite struct EventBufferTests {
    let ids = (0..<8).map { _ in MessageID() }

    @Test func aReaderThatFellBehindReadsMissedEventsWhereTheDroppedOnesWere() async {
        let buffer = EventBuffer(capacity: 3)
        for id in ids.prefix(5) { buffer.yield(.enqueued(id)) }
        buffer.finish()
        var read: [CourierEvent] = []
        for await event in buffer.stream { read.append(event) }
        #expect(read == [.missedEvents(2)] + ids[2..<5].map { .enqueued($0) })
    }

    @Test func aReaderThatKeepsUpMissesNothingAndSeesNoMarker() async {
        let buffer = EventBuffer(capacity: 2)
        var iterator = buffer.stream.makeAsyncIterator()
        var read: [CourierEvent] = []
        for id in ids {
            buffer.yield(.enqueued(id))
            if let event = await iterator.next() { read.append(event) }
        }
        #expect(read == ids.map { .enqueued($0) })
    }

    @Test func aWaitingReaderIsHandedTheNextEvent() async {
        let buffer = EventBuffer(capacity: 2)
        let reader = Task { await buffer.next() }
        // Bounded: the reader registers within a few yields of the scheduler.
        for _ in 0..<1_000 where !buffer.hasWaitingReaderForTesting { await Task.yield() }
        buffer.yield(.cancelled(ids[0]))
        #expect(await reader.value == .cancelled(ids[0]))
    }

    @Test func cancellingTheReaderEndsTheStreamAndUnsubscribesOnce() async {
        let ends = Counter()
        let buffer = EventBuffer(capacity: 2, onTermination: { ends.increment() })
        let reader = Task { () -> Int in
            var n = 0
            for await _ in buffer.stream { n += 1 }
            return n
        }
        for _ in 0..<1_000 where !buffer.hasWaitingReaderForTesting { await Task.yield() }
        reader.cancel()
        #expect(await reader.value == 0)
        buffer.finish()  // the core's close() later: no second unsubscription
        #expect(ends.value == 1)
        buffer.yield(.enqueued(ids[0]))  // after the end: dropped, nothing waits
    }

    @Test func aStreamDroppedUnreadEndsItsSubscription() async {
        let ends = Counter()
        let buffer = EventBuffer(capacity: 2, onTermination: { ends.increment() })
        do {
            var iterator = buffer.stream.makeAsyncIterator()
            buffer.yield(.enqueued(ids[0]))
            _ = await iterator.next()
        }  // the reader broke out of its loop: stream and iterator are gone
        #expect(ends.value == 1)
    }
}

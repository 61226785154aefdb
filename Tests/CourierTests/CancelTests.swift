@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

/// `cancel(_:)` withdraws a pending message for good: never sent again, across restarts.
@Suite struct CancelTests {
    func open(_ directory: URL, _ transport: ScriptedTransport, clock: ManualClock = ManualClock()) throws -> Courier {
        try Courier(directory: directory, configuration: testConfiguration(clock: clock, transport: transport))
    }

    @Test func aCancelledMessageIsNeverSentAndItsWaiterLearnsWhy() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        let courier = try open(temporary.url, transport)
        let events = EventLog(courier.events())
        courier.pause()
        let id = try courier.send(["text": "oops"], to: inbox)
        let waiter = Task { () -> CourierError.Code? in
            do { try await courier.delivered(id); return nil } catch let error as CourierError {
                return error.code
            } catch { return nil }
        }
        #expect(courier.cancel(id))
        #expect(await waiter.value == .cancelled)
        #expect(courier.pendingCount == 0)
        courier.resume()
        await courier.settle()
        #expect(transport.requests.isEmpty)
        await courier.close()
        await events.finish()
        #expect(events.events.contains(.cancelled(id)))
    }

    @Test func cancellingWhatIsNotPendingReturnsFalse() async throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url, ScriptedTransport())
        let id = try courier.send(["text": "hi"], to: inbox)
        try await courier.delivered(id)
        #expect(!courier.cancel(id), "delivered already")
        #expect(!courier.cancel(MessageID()), "never sent")
        courier.pause()
        let second = try courier.send(["text": "again"], to: inbox)
        #expect(courier.cancel(second))
        #expect(!courier.cancel(second), "cancelled already")
        await courier.close()
        #expect(!courier.cancel(second), "closed")
    }

    @Test func aCancelledMessageStaysCancelledAfterAReopen() async throws {
        let temporary = TemporaryDirectory()
        let first = try open(temporary.url, ScriptedTransport())
        first.pause()
        let kept = try first.send(["text": "keep"], to: inbox)
        let withdrawn = try first.send(["text": "withdraw"], to: inbox)
        #expect(first.cancel(withdrawn))
        await first.close()

        let transport = ScriptedTransport()
        let second = try open(temporary.url, transport)
        try await second.delivered(kept)
        await #expect(throws: CourierError(.cancelled, "message \(withdrawn) was cancelled")) {
            try await second.delivered(withdrawn)
        }
        #expect(transport.requests.map(\.messageID) == [kept])
        #expect(second.recovery.isClean)
        await second.close()
    }

    /// An attempt in flight is not stopped; its outcome is dropped, so the message does not
    /// come back, and `delivered` does not report what the app withdrew.
    @Test func theOutcomeOfAnAttemptInFlightWhenCancelledIsDropped() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport()
        transport.holdResponses = true
        let courier = try open(temporary.url, transport)
        let id = try courier.send(["text": "racing"], to: inbox)
        await transport.waitForRequests(1)
        #expect(courier.cancel(id))
        transport.release()
        await courier.settle()
        await #expect(throws: CourierError(.cancelled, "message \(id) was cancelled")) {
            try await courier.delivered(id)
        }
        #expect(courier.pendingCount == 0)
        await courier.close()
        let reopened = try open(temporary.url, ScriptedTransport())
        #expect(reopened.pendingCount == 0)
        await reopened.close()
    }

    @Test func cancellingTheHeadOfAnOrderingKeyLetsTheNextGo() async throws {
        let temporary = TemporaryDirectory()
        let transport = ScriptedTransport { _ in .response(status: 500) }
        var configuration = testConfiguration(clock: ManualClock(), transport: transport)
        configuration.retry = RetryPolicy(initialDelay: .seconds(3600), jitter: .none)
        let courier = try Courier(directory: temporary.url, configuration: configuration)
        let head = try courier.send(["n": 1], to: inbox, orderingKey: "chat-7")
        let next = try courier.send(["n": 2], to: inbox, orderingKey: "chat-7")
        await courier.settle()
        #expect(transport.requests.map(\.messageID) == [head], "the second waits behind the first's hour of backoff")
        #expect(courier.cancel(head))
        await courier.settle()
        #expect(transport.requests.map(\.messageID) == [head, next])
        await courier.close()
    }

    /// Cancelling the task that waits ends the wait at once, with `CancellationError` (what a
    /// SwiftUI `.task` catches); the message is unaffected.
    @Test func cancellingATaskInDeliveredEndsItsWaitButNotTheMessage() async throws {
        let temporary = TemporaryDirectory()
        let courier = try open(temporary.url, ScriptedTransport())
        courier.pause()
        let id = try courier.send(["text": "later"], to: inbox)
        let (registered, signal) = AsyncStream.makeStream(of: Void.self)
        let waiter = Task { () -> (any Error)? in
            signal.yield()
            do { try await courier.delivered(id); return nil } catch { return error }
        }
        var started = registered.makeAsyncIterator()
        await started.next()
        waiter.cancel()
        #expect(await waiter.value is CancellationError)
        let early = Task { () -> (any Error)? in
            withUnsafeCurrentTask { $0?.cancel() }
            do { try await courier.delivered(id); return nil } catch { return error }
        }
        #expect(await early.value is CancellationError, "a task cancelled before it waits does not wait")
        #expect(courier.pendingCount == 1)
        courier.resume()
        try await courier.delivered(id)
        await courier.close()
    }
}

/// What Objective-C, crash reporters and analytics see of a `CourierError`.
@Suite struct CourierErrorBridgingTests {
    @Test func anNSErrorKeepsTheDomainACodeNumberAndTheMessage() {
        let id = MessageID()
        let error = CourierError(.storageFull, "disk full", messageID: id) as NSError
        #expect(error.domain == "CourierKit.CourierError")
        #expect(error.code == 7)
        #expect(error.localizedDescription == "disk full")
        #expect(error.userInfo["CourierMessageID"] as? String == id.description)
    }

    @Test func everyCodeHasANumberOfItsOwn() {
        let numbers = CourierError.Code.allCases.map { CourierError($0, "").errorCode }
        #expect(Set(numbers).count == numbers.count && !numbers.contains(15))
    }
}

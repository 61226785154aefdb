@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

func state(_ n: Int, url: String = "https://example.com/a", due: UInt64 = 1000, attempts: UInt32 = 0) -> MessageState {
    let id = MessageID("00000000-0000-0000-0000-\(String(repeating: "0", count: 12 - String(n).count))\(n)")!
    return MessageState(id: id, url: url, headers: [Header(name: "Content-Type", value: "application/json")],
                        body: Array(#"{"n":\#(n)}"#.utf8), createdMilliseconds: 500, attempts: attempts,
                        nextDueMilliseconds: due)
}

@Suite struct EventCodecTests {
    static let samples: [Event] = [
        .enqueued(state(1)),
        .snapshot(state(2, attempts: 7)),
        .attempted(state(1).id, attempt: 3, outcome: .response(status: 503, retryAfter: "120"),
                   nextDueMilliseconds: 99),
        .attempted(state(1).id, attempt: 4, outcome: .failure(TransportFailure(.connectionClosed, "reset")),
                   nextDueMilliseconds: 100),
        .delivered(state(1).id, attempt: 5, status: 201),
        .abandoned(state(2).id, attempt: 9, reason: "HTTP 404"),
        .cancelled(state(3).id),
        .enqueued(tagged(4, key: nil, tags: ["account:1", "consent"])),
        .snapshot(tagged(5, key: "chat/9", tags: ["ü"])),
        .enqueued(tagged(6, key: "chat/9", tags: [])),
        .held(tag: "account:1"),
        .released(tag: "consent"),
    ]

    static func tagged(_ n: Int, key: String?, tags: [String]) -> MessageState {
        var s = state(n)
        s.orderingKey = key
        s.tags = tags
        return s
    }

    @Test func everyEventSurvivesEncodeAndDecode() {
        for event in Self.samples {
            #expect(Event.decode(kind: event.kind, body: event.encoded()) == event)
            if let id = event.id { #expect(Event.messageID(in: event.encoded()) == id) }
        }
    }

    /// A reason, a transport's message or a `Retry-After` longer than a record's string holds is
    /// cut before the character the 65,535-byte limit falls in, so the record still reads back
    /// (an abandoned message must not come back after a restart because its record is unreadable).
    @Test func anOverlongStringIsCutBeforeACharacterAndStillDecodes() {
        let reason = String(repeating: "é", count: 40_000)  // 2 bytes each: the limit falls inside one
        let failure = TransportFailure(.connectionClosed, String(repeating: "€", count: 30_000))  // ends at it
        let events: [Event] = [
            .abandoned(state(1).id, attempt: 2, reason: reason),
            .attempted(state(1).id, attempt: 3, outcome: .failure(failure), nextDueMilliseconds: 9),
        ]
        for event in events {
            let decoded = Event.decode(kind: event.kind, body: event.encoded())
            #expect(decoded != nil)
            if case .abandoned(_, _, let cut)? = decoded {
                #expect(cut.utf8.count == 65_534 && reason.hasPrefix(cut))
            }
            if case .attempted(_, _, .failure(let cut), _)? = decoded {
                #expect(cut.message.utf8.count == 65_535 && failure.message.hasPrefix(cut.message))
            }
        }
    }

    /// Fields after the due time are written only when there: a message without tags is byte
    /// for byte what it was before tags, one without a key or tags what it was before keys;
    /// tags without a key write an empty key; and each state has one encoding only.
    @Test func tagsAndKeysAreWrittenOnlyWhenThereWithOneEncodingEach() {
        let plain = Event.enqueued(Self.tagged(1, key: nil, tags: [])).encoded()
        let keyed = Event.enqueued(Self.tagged(1, key: "k", tags: [])).encoded()
        let tagged = Event.enqueued(Self.tagged(1, key: nil, tags: ["t"])).encoded()
        #expect(plain == Event.enqueued(state(1)).encoded())
        #expect(keyed == plain + [1, 0, UInt8(ascii: "k")])
        #expect(tagged == plain + [0, 0] + [1] + [1, 0, UInt8(ascii: "t")])
        for noncanonical in [plain + [0, 0], plain + [0, 0, 0], tagged.dropLast(3) + [0, 0]] {
            #expect(Event.decode(kind: .enqueued, body: Array(noncanonical)) == nil)
        }
        #expect(Event.decode(kind: .held, body: [Event.version, 0, 0]) == nil, "an empty tag")
    }

    @Test func truncatedOrExtendedBodiesDecodeToNothingAndNeverTrap() {
        for event in Self.samples {
            let bytes = event.encoded()
            // A key and tags are optional trailing fields: a cut at their start is a valid state
            // without them (the log's checksum, not the parser, catches a torn record).
            let optional = event.fullState.map { $0.orderingKey != nil || !$0.tags.isEmpty } ?? false
            for n in 0..<bytes.count {
                let cut = Event.decode(kind: event.kind, body: Array(bytes.prefix(n)))
                #expect(optional ? cut != event : cut == nil)
            }
            #expect(Event.decode(kind: event.kind, body: bytes + [0]) == nil)
        }
        let random = SeededRandomSource(seed: 9)
        for _ in 0..<2000 {
            let bytes = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            for kind in 0...9 { _ = Event.decode(kind: RecordKind(rawValue: UInt8(kind)), body: [1] + bytes) }
        }
        // Valid bodies with one byte flipped reach deeper into the parser than random bytes.
        let flips = SeededRandomSource(seed: 10)
        for _ in 0..<3000 {
            var bytes = Self.samples[Int(flips.next() % UInt64(Self.samples.count))].encoded()
            bytes[Int(flips.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: flips.next() | 1)
            for kind in 0...9 { _ = Event.decode(kind: RecordKind(rawValue: UInt8(kind)), body: bytes) }
        }
    }
}

func address(_ sequence: UInt64) -> RecordAddress { RecordAddress(sequence: sequence, offset: 40, length: 100) }

@Suite struct ProjectionTests {
    /// Probes 100 ms apart at first, without jitter, and no failure explained by a rate.
    static func probing(multiplier: Double) -> RetryPolicy {
        var policy = RetryPolicy(initialDelay: .milliseconds(100), multiplier: multiplier, jitter: .none)
        policy.explainedFailures = .disabled
        return policy
    }

    @Test func theLastFullStateWinsAndLaterDeltasApply() {
        var p = Projection(fifoPerDestination: false)
        p.apply(.enqueued(state(1, due: 10)), address: address(1))
        p.apply(.attempted(state(1).id, attempt: 1, outcome: .response(status: 500), nextDueMilliseconds: 20),
                address: address(2))
        p.apply(.snapshot(state(1, due: 20, attempts: 1)), address: address(3))
        p.apply(.attempted(state(1).id, attempt: 2, outcome: .response(status: 500), nextDueMilliseconds: 40),
                address: address(4))
        #expect(p.slot(of: state(1).id)?.attempts == 2)
        #expect(p.slot(of: state(1).id)?.dueMilliseconds == 40)
        #expect(p.slot(of: state(1).id)?.address == address(3))
        #expect(p.brokenInvariant() == nil)
    }

    @Test func deltasOfUnknownIdsAreIgnoredAndResolvedMessagesStayResolved() {
        var p = Projection(fifoPerDestination: false)
        #expect(p.apply(.attempted(state(5).id, attempt: 1, outcome: .response(status: 500), nextDueMilliseconds: 1),
                        address: address(1)) == .ignored)
        #expect(p.apply(.delivered(state(5).id, attempt: 1, status: 200), address: address(2)) == .ignored)
        p.apply(.enqueued(state(1)), address: address(3))
        #expect(p.apply(.delivered(state(1).id, attempt: 1, status: 200), address: address(4)) == .ended)
        #expect(p.apply(.attempted(state(1).id, attempt: 2, outcome: .response(status: 500), nextDueMilliseconds: 1),
                        address: address(5)) == .ignored)
        #expect(p.isEmpty)
        #expect(p.brokenInvariant() == nil)
    }

    @Test func dueMessagesComeOutInDueOrderAndNotBeforeTheirTime() {
        var p = Projection(fifoPerDestination: false)
        for (n, due) in [(1, 300), (2, 100), (3, 200)] {
            p.apply(.enqueued(state(n, due: UInt64(due))), address: address(UInt64(n)))
        }
        #expect(p.takeNext(.now, nowMilliseconds: 99)?.slot == nil)
        #expect(p.earliestDue == 100)
        #expect(p.takeNext(.now, nowMilliseconds: 1000)?.slot.id == state(2).id)
        #expect(p.takeNext(.now, nowMilliseconds: 1000)?.slot.id == state(3).id)
        #expect(p.takeNext(.now, nowMilliseconds: 1000)?.slot.id == state(1).id)
        #expect(p.takeNext(.now, nowMilliseconds: 1000)?.slot == nil, "all three are in flight")
        p.retry(state(2).id, attempts: 1, dueMilliseconds: 5000)
        #expect(p.earliestDue == 5000)
        #expect(p.brokenInvariant() == nil)
    }

    @Test func fifoPerDestinationReleasesTheNextOnlyWhenTheHeadIsDone() {
        var p = Projection(fifoPerDestination: true)
        p.apply(.enqueued(state(1, url: "https://a.example/x", due: 100)), address: address(1))
        p.apply(.enqueued(state(2, url: "https://a.example/x", due: 0)), address: address(2))
        p.apply(.enqueued(state(3, url: "https://b.example/y", due: 50)), address: address(3))
        #expect(p.takeNext(.now, nowMilliseconds: 1000)?.slot.id == state(3).id)
        #expect(p.takeNext(.now, nowMilliseconds: 1000)?.slot.id == state(1).id, "2 is due earlier but waits behind 1")
        #expect(p.takeNext(.now, nowMilliseconds: 1000)?.slot == nil)
        p.retry(state(1).id, attempts: 1, dueMilliseconds: 2000)
        #expect(p.takeNext(.now, nowMilliseconds: 1500)?.slot == nil, "1 failed and is not due; 2 still waits")
        p.remove(state(1).id)
        #expect(p.takeNext(.now, nowMilliseconds: 1500)?.slot.id == state(2).id)
        #expect(p.brokenInvariant() == nil)
    }

    @Test func eachURLIsStoredOnceAndForgottenWithItsLastMessage() {
        var p = Projection(fifoPerDestination: false)
        for n in 1...50 { p.apply(.enqueued(state(n, url: "https://host/\(n % 3)")), address: address(UInt64(n))) }
        #expect(p.urls.count == 3)
        for n in 1...50 where n % 3 == 0 { p.remove(state(n).id) }
        #expect(p.urls.count == 2)
        #expect(p.url(of: p.slot(of: state(1).id)!) == "https://host/1")
        #expect(p.brokenInvariant() == nil)
    }

    /// Random operations, checked after each step against the dictionary model and the
    /// projection's own invariants (index, heap order, schedulable set).
    @Test(arguments: [false, true]) func randomOperationsAgreeWithTheReferenceModel(fifo: Bool) {
        let random = SeededRandomSource(seed: fifo ? 11 : 12)
        var p = Projection(fifoPerDestination: fifo)
        var model = ReferenceProjection()
        var inFlight: Set<MessageID> = []
        var sequence: UInt64 = 0
        for step in 0..<4000 {
            sequence += 1
            let n = Int(random.next() % 300) + 1
            let id = state(n).id
            switch random.next() % 6 {
            case 0, 1:
                let s = state(n, url: "https://h/\(n % 7)", due: random.next() % 1000,
                              attempts: UInt32(random.next() % 4))
                p.apply(.enqueued(s), address: address(sequence))
                model.apply(.enqueued(s))
            case 2:
                let due = random.next() % 1000
                p.apply(.attempted(id, attempt: 9, outcome: .response(status: 500), nextDueMilliseconds: due),
                        address: address(sequence))
                model.apply(.attempted(id, attempt: 9, outcome: .response(status: 500), nextDueMilliseconds: due))
            case 3:
                p.apply(.delivered(id, attempt: 1, status: 200), address: address(sequence))
                model.apply(.delivered(id, attempt: 1, status: 200))
                inFlight.remove(id)
            case 4:
                if let slot = p.takeNext(.now, nowMilliseconds: random.next() % 1200)?.slot { inFlight.insert(slot.id) }
            default:
                if let taken = inFlight.first {
                    inFlight.remove(taken)
                    p.release(taken)
                }
            }
            #expect(p.count == model.states.count, "step \(step)")
            let same = model.states.allSatisfy { p.slot(of: $0.key)?.dueMilliseconds == $0.value.nextDueMilliseconds }
            #expect(same, "step \(step)")
            #expect(p.brokenInvariant() == nil, "step \(step)")
            if !same || p.count != model.states.count { return }
        }
    }

    /// Random operations with destinations going down and up, refusing for load, probes,
    /// withheld messages and ordering keys, under an adaptive limit of at most 4 per destination: after each
    /// step the invariants hold (index, heap, parked and sending counts), no two messages of one
    /// key are in flight at once, and a probe is only ever taken for a down destination.
    ///
    /// Long and CPU-bound: it yields every 50 steps, so it shares the cooperative pool (as many
    /// threads as cores) with the suite's real-time tests instead of holding a thread for its
    /// whole run (under ThreadSanitizer, both threads for ~100 s), and it checks each step with
    /// a plain `if`, recording an issue only when a check fails.
    @Test(arguments: [false, true]) func randomOutagesProbesAndLanesKeepEveryInvariant(fifo: Bool) async {
        let random = SeededRandomSource(seed: fifo ? 21 : 22)
        var p = Projection(fifoPerDestination: fifo)
        p.origins.rules = Governor.Rules(
            concurrency: ConcurrencyLimit(initialLimit: 2), maximumConcurrency: 4,
            backoff: DestinationBackoff(failuresBeforeDown: 2), retry: Self.probing(multiplier: 2))
        var inFlight: [MessageID] = []  // an array: a Set's order changes between runs
        var held: [MessageID] = []  // withheld, as a message an earlier process handed off
        var keyOf: [MessageID: String] = [:]
        var sequence: UInt64 = 0
        var now: UInt64 = 0
        var sawDown = false, sawProbe = false, sawHeld = false, sawLimited = false
        for step in 0..<6000 {
            if step % 50 == 0 { await Task.yield() }
            sequence += 1
            now += random.next() % 50
            let n = Int(random.next() % 200) + 1
            let id = state(n).id
            switch random.next() % 8 {
            case 0, 1:
                guard p.slot(of: id) == nil else { break }
                var s = state(n, url: "https://h\(n % 3).example/\(n % 5)", due: now + random.next() % 500)
                s.orderingKey = random.next() % 2 == 0 ? "k\(n % 4)" : nil
                keyOf[id] = s.orderingKey
                p.apply(.enqueued(s), address: address(sequence))
                if random.next() % 4 == 0 {  // withheld: an upload of an earlier process has it
                    p.withhold(id)
                    held.append(id)
                }
            case 2:
                if let slot = p.takeNext(.now, nowMilliseconds: now)?.slot {
                    let i = p.slotIndex(of: slot.id)!, o = p.origin(ofSlot: i)
                    if p.origins[o].governor.outage?.probe == slot.order {
                        #expect(p.origins.isDown(o))
                        #expect(!held.contains(slot.id), "a withheld message went as a probe at step \(step)")
                        sawProbe = true
                    } else {
                        #expect(!held.contains(slot.id), "a withheld message was taken at step \(step)")
                        let governor = p.origins[o].governor
                        #expect(governor.sending <= max(4, governor.flow.count + 4), "step \(step)")
                        if p.origins.throttled.contains(o) { sawHeld = true }
                    }
                    inFlight.append(slot.id)
                }
            case 3, 4:
                guard !inFlight.isEmpty else { break }
                let taken = inFlight.remove(at: Int(random.next() % UInt64(inFlight.count)))
                let outcomes: [DeliveryOutcome] = [
                    .failure(TransportFailure(.connectionFailed, "")), .response(status: 500),
                    .response(status: 503), .failure(TransportFailure(.timeout, "")),
                    .response(status: 200), .response(status: 200),
                ]
                let outcome = outcomes[Int(random.next() % UInt64(outcomes.count))]
                let failing = !outcome.isSuccess
                let change = p.observe(
                    outcome, ofSlot: p.slotIndex(of: taken)!, startedMilliseconds: now - min(now, random.next() % 100),
                    retryAfter: random.next() % 4 == 0 ? .milliseconds(300) : nil, random: random.next(),
                    nowMilliseconds: now)
                if case .wentDown = change { sawDown = true }
                if case .limited = change { sawLimited = true }
                if failing { p.retry(taken, attempts: 1, dueMilliseconds: now + 200) } else { p.remove(taken) }
            case 5:
                guard !inFlight.isEmpty else { break }
                p.release(inFlight.removeFirst())
            case 6:
                if random.next() % 2 == 0, p.slot(of: id) != nil, !inFlight.contains(id), !held.contains(id) {
                    p.withhold(id)
                    held.append(id)
                } else if !held.isEmpty {
                    p.release(held.removeFirst())
                }
            default:
                if random.next() % 10 == 0 { p.clampDue(backoffAtMost: now, retryAfterAtMost: now, waitingOnly: true) }
            }
            if let broken = p.brokenInvariant() {
                Issue.record("\(broken), at step \(step)")
                return
            }
            let keys = inFlight.compactMap { keyOf[$0] }
            if Set(keys).count != keys.count { Issue.record("two messages of one key in flight at step \(step)") }
        }
        #expect(sawDown && sawProbe && sawHeld && sawLimited, "the run exercised outages, probes, limits and load")
    }

    /// A recovery leaves the backlog where it waited: due now, held in its destination's queue
    /// and released oldest first as the limit allows. It never goes through the heap (a push per
    /// message at the recovery, then a pop and a park again at the next plan).
    @Test func aRecoveredDestinationReleasesItsBacklogOldestFirstWithinItsLimit() throws {
        var p = Projection(fifoPerDestination: false)
        p.origins.rules = Governor.Rules(
            concurrency: ConcurrencyLimit(initialLimit: 2), maximumConcurrency: 2,
            backoff: DestinationBackoff(failuresBeforeDown: 1), retry: Self.probing(multiplier: 1))
        for n in 1...21 { p.apply(.enqueued(state(n, due: 0)), address: address(UInt64(n))) }
        func answer(_ outcome: DeliveryOutcome, of id: MessageID, at now: UInt64) -> Governor.Change {
            p.observe(
                outcome, ofSlot: p.slotIndex(of: id)!, startedMilliseconds: nil, retryAfter: nil, random: 0,
                nowMilliseconds: now)
        }
        let taken = p.takeNext(.now, nowMilliseconds: 10)?.slot
        let first = try #require(taken)
        guard case .wentDown = answer(.response(status: 500), of: first.id, at: 20) else {
            Issue.record("one failure in a row takes the destination down here")
            return
        }
        p.retry(first.id, attempts: 1, dueMilliseconds: 5_000)
        #expect(p.takeNext(.now, nowMilliseconds: 30)?.slot == nil, "every due message is parked while down")
        #expect(p.heap.isEmpty)
        let probed = p.takeNext(.now, nowMilliseconds: 120)?.slot
        let probe = try #require(probed)
        #expect(probe.id == first.id, "the oldest parked message is the probe")
        guard case .recovered = answer(.response(status: 200), of: probe.id, at: 130) else {
            Issue.record("an answered probe brings the destination back")
            return
        }
        // What `.destinationRecovered` reports as released.
        let released = p.origins[p.origin(ofSlot: p.slotIndex(of: probe.id)!)].parkedCount
        p.remove(probe.id)
        #expect(released == 20)
        #expect(p.heap.isEmpty, "the backlog stays in its queue")
        #expect(p.brokenInvariant() == nil)
        let a = p.takeNext(.now, nowMilliseconds: 130)?.slot, b = p.takeNext(.now, nowMilliseconds: 130)?.slot
        #expect([a?.id, b?.id] == [state(2).id, state(3).id], "oldest first")
        #expect(p.takeNext(.now, nowMilliseconds: 130) == nil, "at its limit of 2")
        p.remove(state(2).id)
        #expect(p.takeNext(.now, nowMilliseconds: 131)?.slot.id == state(4).id)
        #expect(p.brokenInvariant() == nil)
    }
}

/// Taking the next message to deliver, and telling its destination how it went: one selection
/// for the engine's attempts and for background hand-off, which differ only in when the message
/// starts (`Start`).
///
/// In order: a down destination's probe (one per destination), then a message parked by its
/// destination's limit or pace (the oldest), then the earliest due. Whether and when one more
/// may start is its destination's `Governor` (`earliestStart`); a due message it holds back is
/// *parked* in its origin's queue, out of the heap. An engine attempt that is a retry or a probe
/// also takes a token of the destination's retry budget; one without waits in the heap for the
/// next token, where first attempts pass it. Only lane heads are ever schedulable, so ordering
/// keys hold either way.
extension Projection {
    /// When a taken message starts.
    enum Start: Equatable {
        /// Now, as an engine attempt: only what is due now, and what its destination allows now.
        case now
        /// When it may, as a background upload that the session begins later: whatever its due
        /// time; it begins at its due time, or its destination's pace, or its probe time,
        /// whichever is latest (`Governor.earliestStart`, `handOff`).
        case whenAllowed
    }

    /// A message taken, marked in flight, and when it may begin; with the messages that go in
    /// its request (`takeRiders`).
    struct Taken {
        var slot: Slot
        var beginMilliseconds: UInt64
        var riders: [Slot] = []
    }

    /// Takes up to `limit` messages (see above). Messages for which `skip` is true stay where
    /// they are (a down destination whose next message is skipped sends no probe that way);
    /// each is looked at once per call, however many are taken.
    mutating func take(
        _ start: Start, limit: Int, nowMilliseconds now: UInt64, skip: (Slot, String) -> Bool = { _, _ in false }
    ) -> [Taken] {
        var taken: [Taken] = []
        var skipped: [UInt32] = []
        // Each turn takes one message: bounded by `limit`.
        while taken.count < limit,
            var next = takeProbe(start, nowMilliseconds: now, skip: skip)
                ?? takeParked(start, nowMilliseconds: now, skip: skip)
                ?? takeFromHeap(start, nowMilliseconds: now, skip: skip, skipped: &skipped)
        {
            if start == .now { next.riders = takeRiders(of: slotIndex(of: next.slot.id)!, nowMilliseconds: now) }
            taken.append(next)
        }
        for i in skipped { heapPush(i) }
        return taken
    }

    /// When origin `o` may start one more delivery, at the earliest `earliest` (its governor).
    func startTime(_ o: UInt32, notBefore earliest: UInt64, _ start: Start = .now) -> UInt64? {
        origins[o].governor.earliestStart(notBefore: earliest, handOff: start == .whenAllowed)
    }

    /// Starts slot `i`'s delivery at `begin` with its destination's governor. A retry or probe
    /// the engine makes (not a first attempt, a retry the pace spaces after a 429 or 503, or a
    /// hand-off) takes a token; false if there is none: a retry is then due at the next token
    /// (later than now), for the caller to put in the heap.
    private mutating func startDelivery(_ i: UInt32, origin o: UInt32, _ start: Start, at begin: UInt64) -> Bool {
        let slot = slots[Int(i)]
        let down = origins.isDown(o)
        let charged = start == .now && (down || slot.attempts > 0 && !slot.flags.contains(.pacedRetry))
        guard origins[o].governor.start(message: slot.order, charged: charged, at: begin) else {
            if !down {
                let token = origins[o].governor.nextTokenMilliseconds(at: begin)
                slots[Int(i)].dueMilliseconds = max(slot.dueMilliseconds, token)
                assert(slots[Int(i)].dueMilliseconds > begin, "a retry without a token is due later")
            }
            return false
        }
        slots[Int(i)].flags.formUnion([.inFlight, .sending])
        slots[Int(i)].flags.remove(.pacedRetry)
        return true
    }

    /// Slot `i` taken (`startDelivery`), or, without a token, back in the heap: due at the next
    /// token, later than now, so the selection does not see it again.
    private mutating func started(_ i: UInt32, origin o: UInt32, _ start: Start, at begin: UInt64) -> Taken? {
        if startDelivery(i, origin: o, start, at: begin) { return Taken(slot: slots[Int(i)], beginMilliseconds: begin) }
        heapPush(i)
        return nil
    }

    private func skips(_ i: UInt32, _ skip: (Slot, String) -> Bool) -> Bool {
        skip(slots[Int(i)], url(of: slots[Int(i)]))
    }

    /// A down destination's oldest parked message, as its probe: one at a time, and (`.now`)
    /// only once its probe time has come.
    private mutating func takeProbe(
        _ start: Start, nowMilliseconds now: UInt64, skip: (Slot, String) -> Bool
    ) -> Taken? {
        for o in origins.down {
            guard origins[o].parkedCount > 0, let begin = startTime(o, notBefore: now, start),
                start == .whenAllowed || begin == now, let first = firstParked(o), !skips(first, skip),
                startDelivery(first, origin: o, start, at: now)
            else { continue }
            let i = popParked(o)
            assert(i == first, "the first parked entry is the one popped")
            return Taken(slot: slots[Int(first)], beginMilliseconds: begin)
        }
        return nil
    }

    /// The oldest message parked by a destination that is up, if its limit (and, `.now`, its
    /// pace) allows one more. The engine takes it now whatever its due time: a message parked
    /// by its destination's limit waits for that, not for its due time. (A hand-off pass parks
    /// one not yet due when the limit is reached, so that the heap is not walked again at every
    /// pass; back in the foreground the engine takes it as soon as the limit allows; no timer is
    /// armed for a parked message's due time.) A hand-off begins it at its due time.
    private mutating func takeParked(
        _ start: Start, nowMilliseconds now: UInt64, skip: (Slot, String) -> Bool
    ) -> Taken? {
        // Bounded by the few throttled origins; emptied ones are dropped on the way.
        origins.throttled = origins.throttled.filter { !origins.isDown($0) && origins[$0].parkedCount > 0 }
        for o in origins.throttled {
            // Bounded by the origin's parked queue: a retry without a token leaves it for the heap.
            while let first = firstParked(o), !skips(first, skip),
                let begin = startTime(
                    o, notBefore: start == .now ? now : max(now, slots[Int(first)].dueMilliseconds), start),
                start == .whenAllowed || begin == now, let i = popParked(o)
            {
                assert(i == first, "the first parked entry is the one popped")
                if let taken = started(i, origin: o, start, at: begin) { return taken }
            }
        }
        return nil
    }

    /// The earliest message in the heap (`.now`: due now). One of a destination that is down,
    /// or whose limit or pace holds it back, is parked on the way (each at most once: bounded by
    /// the heap's size); one skipped is set aside, for `take` to put back.
    private mutating func takeFromHeap(
        _ start: Start, nowMilliseconds now: UInt64, skip: (Slot, String) -> Bool, skipped: inout [UInt32]
    ) -> Taken? {
        while let top = heap.first, start == .whenAllowed || slots[Int(top)].dueMilliseconds <= now {
            heapRemove(top)
            if skips(top, skip) {
                skipped.append(top)
                continue
            }
            let o = origin(ofSlot: top)
            guard !origins.isDown(o),
                let begin = startTime(o, notBefore: max(now, slots[Int(top)].dueMilliseconds), start),
                start == .whenAllowed || begin == now
            else {
                park(top)
                continue
            }
            if let taken = started(top, origin: o, start, at: begin) { return taken }
        }
        return nil
    }

    /// The messages that go in the request of slot `leader` (just taken) to a batching
    /// destination that is up (`Batching`): to its URL, with its tags, neither `.solo`, due
    /// within `maximumDelay`; first from its origin's parked queue (oldest first), then from the
    /// heap (earliest first); at most `maximumCount - 1`. In flight, but not sending: the
    /// destination's limit counts the request once. Lane heads only (as every heap and parked
    /// entry), so ordering keys hold. Bounded: looks at most `4 × maximumCount` entries of each.
    mutating func takeRiders(of leader: UInt32, nowMilliseconds now: UInt64) -> [Slot] {
        let o = origin(ofSlot: leader), first = slots[Int(leader)]
        guard let batching = origins[o].batching, batching.maximumCount > 1, !origins.isDown(o),
            !first.flags.contains(.solo)
        else { return [] }
        let window = now &+ NextDue.milliseconds(batching.maximumDelay)
        let (wanted, looks) = (batching.maximumCount - 1, 4 * batching.maximumCount)
        func fits(_ i: UInt32) -> Bool {
            let slot = slots[Int(i)]
            return slot.urlIndex == first.urlIndex && !slot.flags.contains(.solo) && slot.dueMilliseconds <= window
                && tags.tagsBySlot[i] == tags.tagsBySlot[leader]
        }
        var riders: [UInt32] = []
        for i in origins[o].parked.entries.prefix(looks) where riders.count < wanted && isParked(i, at: o) && fits(i) {
            unparked(i)  // its queue entry goes stale
            riders.append(i)
        }
        var setAside: [UInt32] = []
        while riders.count < wanted, setAside.count < looks, let top = heap.first,
            slots[Int(top)].dueMilliseconds <= window
        {
            heapRemove(top)
            if fits(top) { riders.append(top) } else { setAside.append(top) }
        }
        for i in setAside { heapPush(i) }
        for i in riders {
            slots[Int(i)].flags.insert(.inFlight)
            slots[Int(i)].flags.remove(.pacedRetry)  // as `startDelivery` does: this attempt is made
        }
        return riders.map { slots[Int($0)] }
    }

    // MARK: Answers

    /// Tells slot `i`'s destination what its attempt said (`Governor.observe`), and returns what
    /// changed, for the core to report (its origin's `parkedCount`, after a recovery: how many it
    /// released). A recovery makes every parked message of it due now at the latest (attempt
    /// counts kept), left in its queue: `take` releases them oldest first, as the limit and pace
    /// allow (moving them into the heap cost a push each, then a pop and a park again for all but
    /// the few the limit let through, under the core's lock).
    mutating func observe(_ ending: Ending, ofSlot i: UInt32, nowMilliseconds now: UInt64) -> Governor.Change {
        let o = origin(ofSlot: i)
        let change = origins[o].governor.observe(ending, message: slots[Int(i)].order, at: now)
        switch change {
        case .wentDown: origins.down.append(o)
        case .recovered:
            origins.down.removeAll { $0 == o }
            // Bounded by the queue's length; stale entries (no longer parked here) are skipped.
            for p in origins[o].parked.entries where isParked(p, at: o) {
                slots[Int(p)].dueMilliseconds = min(slots[Int(p)].dueMilliseconds, now)
            }
            if origins[o].parkedCount > 0 && !origins.throttled.contains(o) { origins.throttled.append(o) }
        case .none, .limited: break
        }
        return change
    }

    /// An upload of `id` that ended while the app was dead, heard late (`Governor.heardLate`).
    mutating func heardLate(of id: MessageID, status: UInt16?, nowMilliseconds now: UInt64) {
        guard let i = slotIndex(of: id) else { return }
        origins[origin(ofSlot: i)].governor.heardLate(status: status, at: now)
    }

    /// Slot `i`'s record could not be read: if it was its destination's probe, the next probe
    /// waits until `dueMilliseconds` too (`Governor.unreadable`).
    mutating func unreadable(slot i: UInt32, dueMilliseconds: UInt64) {
        origins[origin(ofSlot: i)].governor.unreadable(message: slots[Int(i)].order, dueMilliseconds: dueMilliseconds)
    }

    // MARK: Parking

    func origin(ofSlot i: UInt32) -> UInt32 { urls.origin(slots[Int(i)].urlIndex) }

    /// The governor of slot `i`'s destination.
    func governor(ofSlot i: UInt32) -> Governor { origins[origin(ofSlot: i)].governor }

    /// Parks slot `i` (out of the heap) in its origin's queue.
    mutating func park(_ i: UInt32) {
        let o = origin(ofSlot: i)
        assert(slots[Int(i)].heapIndex == Self.notInHeap && !slots[Int(i)].flags.contains(.parked))
        slots[Int(i)].flags.insert(.parked)
        origins[o].parked.append(i)
        origins[o].parkedCount += 1
        if !origins.isDown(o) && !origins.throttled.contains(o) { origins.throttled.append(o) }
    }

    /// Bookkeeping for a slot leaving the parked state other than by a pop (its message was
    /// removed or held). The queue entry goes stale; pops skip it.
    mutating func unparked(_ i: UInt32) {
        slots[Int(i)].flags.remove(.parked)
        origins[origin(ofSlot: i)].parkedCount -= 1
    }

    /// Whether an entry of origin `o`'s queue is live: slot `i` is still parked there (an entry
    /// goes stale when its slot leaves other than by a pop, or is reused for another origin).
    private func isParked(_ i: UInt32, at o: UInt32) -> Bool {
        slots[Int(i)].flags.contains(.parked) && origin(ofSlot: i) == o
    }

    /// Pops origin `o`'s oldest parked slot (stale entries are skipped; bounded by the queue).
    mutating func popParked(_ o: UInt32) -> UInt32? {
        while let i = origins[o].parked.popFirst() {
            guard isParked(i, at: o) else { continue }
            slots[Int(i)].flags.remove(.parked)
            origins[o].parkedCount -= 1
            return i
        }
        assert(origins[o].parkedCount == 0, "parkedCount said a slot was parked")
        return nil
    }

    /// The oldest parked slot of origin `o`, left in place (stale entries are skipped, not
    /// removed: no copy, no mutation).
    func firstParked(_ o: UInt32) -> UInt32? {
        origins[o].parked.entries.first { isParked($0, at: o) }
    }

    /// Slot `i`'s delivery is over (or it was never one): its destination's count drops, and
    /// its probe ends if it was one.
    mutating func stopSending(_ i: UInt32) {
        guard slots[Int(i)].flags.contains(.sending) else { return }
        slots[Int(i)].flags.remove(.sending)
        origins[origin(ofSlot: i)].governor.stopped(message: slots[Int(i)].order)
    }
}

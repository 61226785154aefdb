/// Taking the next message to deliver: one selection for the engine's attempts and for
/// background hand-off, which differ only in when the message starts (`Start`).
///
/// In order: a down destination's probe (one per destination), then a message parked by its
/// destination's limit or pace (the oldest), then the earliest due. Every taken message counts
/// toward its destination's limit and moves its pace on (`startSending`); whether one more may
/// start is one rule, `startTime(_:notBefore:)`. An engine attempt that is a retry or a probe
/// also takes a token of its destination's retry budget (`paysForRetry`); one without waits in
/// the heap for the next token, where first attempts pass it. Only lane heads are ever
/// schedulable, so ordering keys hold either way.
extension Projection {
    /// When a taken message starts.
    enum Start: Equatable {
        /// Now, as an engine attempt: only what is due now, and what its destination's limit and
        /// pace allow now.
        case now
        /// When it may, as a background upload that the session begins later: whatever its due
        /// time; it begins at its due time, or its destination's pace, or its probe time,
        /// whichever is latest. Its destination's concurrency limit holds it back only until
        /// the destination has answered (see `startTime`).
        case whenAllowed
    }

    /// A message taken, marked in flight, and when it may begin.
    struct Taken {
        var slot: Slot
        var beginMilliseconds: UInt64
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
            let next = takeProbe(start, nowMilliseconds: now, skip: skip)
                ?? takeParked(start, nowMilliseconds: now, skip: skip)
                ?? takeFromHeap(start, nowMilliseconds: now, skip: skip, skipped: &skipped)
        {
            taken.append(next)
        }
        for i in skipped { heapPush(i) }
        return taken
    }

    /// The next message, or nil (`take` of one).
    mutating func takeNext(_ start: Start, nowMilliseconds now: UInt64) -> Taken? {
        take(start, limit: 1, nowMilliseconds: now).first
    }

    /// When origin `o` (up) may start one more delivery, at the earliest `earliest`: then, or
    /// at its pace's next start if later; nil while its limit is reached. The one rule of the
    /// destination's limit and pace: the engine starts a message only if this is now.
    ///
    /// A hand-off (`.whenAllowed`) to a destination that has answered since this process opened
    /// (a 2xx, or any answer `DestinationBackoff` counts as up: a 401 or 404 is the message's, not
    /// the server's; and it has not been down since) keeps to its pace but not to its limit:
    /// the session's bound (`maximumOutstandingTasks`) is its limit. The system runs a
    /// background session's uploads, a few connections per host at a time, at times it picks,
    /// so the count of tasks handed off is not the count in flight at the server; and the
    /// limit is learned from answers that a suspended app hears only at its rare wakes, so it
    /// would hold the hand-off to a handful of uploads per wake (a 50%-failing server: 226 of
    /// 500 delivered in 30 suspended minutes, against 500 without it). Until the destination
    /// has answered, its limit (4 at first) holds, and one at a time once it has failed: a
    /// suspended app cannot take back what it handed off, so a server that is down costs a
    /// handful of requests before it is known down, not a hundred.
    func startTime(_ o: UInt32, notBefore earliest: UInt64, _ start: Start = .now) -> UInt64? {
        let entry = origins[o]
        guard start == .whenAllowed else {
            return origins.concurrency.nextStart(entry.flow, sending: entry.sending).map { max(earliest, $0) }
        }
        if entry.lastHealthyMilliseconds != nil { return max(earliest, origins.concurrency.paceStart(entry.flow)) }
        if entry.consecutiveFailures > 0 && entry.sending >= 1 { return nil }
        return origins.concurrency.nextStart(entry.flow, sending: entry.sending).map { max(earliest, $0) }
    }

    /// Whether origin `o` (up) may start one more delivery now.
    func mayStart(_ o: UInt32, nowMilliseconds now: UInt64) -> Bool { startTime(o, notBefore: now) == now }

    /// `.now`: takes a token of origin `o`'s retry budget for slot `i` if its attempt is a
    /// retry (not one its destination's limit paces after a 429 or 503: the server's pace
    /// bounds those). False if there is none: the slot is then due at the next token (later
    /// than now), for the caller to put in the heap. A first attempt and a hand-off pay nothing.
    private mutating func paysForRetry(_ i: UInt32, origin o: UInt32, _ start: Start, nowMilliseconds now: UInt64)
        -> Bool
    {
        guard start == .now, slots[Int(i)].attempts > 0, !slots[Int(i)].flags.contains(.pacedRetry) else {
            return true
        }
        if origins.takeToken(o, nowMilliseconds: now) { return true }
        let nextToken = origins.nextToken(o, nowMilliseconds: now)
        slots[Int(i)].dueMilliseconds = NextDue.withoutRetryToken(
            dueMilliseconds: slots[Int(i)].dueMilliseconds, nextTokenMilliseconds: nextToken)
        assert(slots[Int(i)].dueMilliseconds > now, "a retry without a token is due later")
        return false
    }

    private func skips(_ i: UInt32, _ skip: (Slot, String) -> Bool) -> Bool {
        skip(slots[Int(i)], url(of: slots[Int(i)]))
    }

    /// A down destination's next parked message, as its probe: one at a time, and (`.now`) only
    /// once its probe time has come.
    private mutating func takeProbe(
        _ start: Start, nowMilliseconds now: UInt64, skip: (Slot, String) -> Bool
    ) -> Taken? {
        for o in origins.down {
            guard let outage = origins[o].outage, outage.probe == nil, origins[o].parkedCount > 0,
                start == .whenAllowed || outage.nextProbeMilliseconds <= now,
                let first = firstParked(o), !skips(first, skip)
            else { continue }
            // A probe is a retry of the destination: it takes a token, or waits for the next.
            if start == .now && !origins.takeToken(o, nowMilliseconds: now) {
                origins[o].outage!.nextProbeMilliseconds = origins.nextToken(o, nowMilliseconds: now)
                continue
            }
            guard let i = popParked(o) else { continue }
            assert(i == first, "the first parked entry is the one popped")
            startSending(i, nowMilliseconds: now)
            origins[o].outage!.probe = i
            return Taken(slot: slots[Int(i)], beginMilliseconds: max(now, outage.nextProbeMilliseconds))
        }
        return nil
    }

    /// The oldest message parked by a destination that is up, if its limit (and, `.now`, its
    /// pace) allows one more. The engine takes it now whatever its due time: a message parked
    /// by its destination's limit waits for that, not for its due time. (A hand-off pass parks
    /// one not yet due when the limit is reached, so that the heap is not walked again at every
    /// pass; back in the foreground, where waiting messages are retried at once anyway
    /// (`retryNow()`), the engine takes it as soon as the limit allows; no timer is armed for a
    /// parked message's due time.) A hand-off begins it at its due time.
    private mutating func takeParked(
        _ start: Start, nowMilliseconds now: UInt64, skip: (Slot, String) -> Bool
    ) -> Taken? {
        // Bounded by the few origins holding messages; emptied ones are dropped on the way.
        origins.holding = origins.holding.filter { !origins.isDown($0) && origins[$0].parkedCount > 0 }
        for o in origins.holding {
            // Bounded by the origin's parked queue: a retry without a token leaves it for the heap.
            while let first = firstParked(o), !skips(first, skip),
                let begin = startTime(
                    o, notBefore: start == .now ? now : max(now, slots[Int(first)].dueMilliseconds), start),
                start == .whenAllowed || begin == now, let i = popParked(o)
            {
                assert(i == first, "the first parked entry is the one popped")
                guard paysForRetry(i, origin: o, start, nowMilliseconds: begin) else {
                    heapPush(i)
                    continue
                }
                startSending(i, nowMilliseconds: begin)
                return Taken(slot: slots[Int(i)], beginMilliseconds: begin)
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
            // Due at the next token: later than now, so this loop does not see it again.
            guard paysForRetry(top, origin: o, start, nowMilliseconds: begin) else {
                heapPush(top)
                continue
            }
            startSending(top, nowMilliseconds: begin)
            return Taken(slot: slots[Int(top)], beginMilliseconds: begin)
        }
        return nil
    }
}

/// Backoff and concurrency per destination (see `OriginTable`): parking the messages of a
/// destination that is down or at its limit, taking them back one at a time (as a probe, or as
/// the limit and pace allow), and bringing them all back when a down destination answers.
extension Projection {
    /// What one attempt's outcome says about its destination (`DestinationBackoff.signal`).
    enum DestinationSignal: Equatable {
        /// The server answered something other than 5xx, 429 or 408: it is up.
        case healthy
        /// 429 or 503: load, if the destination answered 2xx lately; else an outage's failure.
        case overloaded
        /// A timeout: too much in flight, if the destination answered 2xx lately; and a failure.
        case timedOut
        /// A connection error, TLS, other 5xx or 408: the destination is in trouble.
        case failing
        /// Says nothing about the destination (a local failure, e.g. `prepareRequest` threw).
        case neutral
    }

    /// What an observation changed, for the core to report as an event.
    enum DestinationChange: Equatable {
        case none
        case wentDown(origin: String, consecutiveFailures: Int)
        case recovered(origin: String, downMilliseconds: UInt64, released: Int)
        /// A refusal for load from a destination that is answering: the message is retried at
        /// the destination's pace, not on its own backoff.
        case limited
    }

    func origin(ofSlot i: UInt32) -> UInt32 { destinations.origin(slots[Int(i)].destination) }

    /// Puts a slot that is not in the heap where it belongs: parked if its destination is
    /// down, else in the heap.
    mutating func makeSchedulable(_ i: UInt32) {
        assert(slots[Int(i)].heapIndex == Self.notInHeap)
        if origins.isDown(origin(ofSlot: i)) { park(i) } else { heapPush(i) }
    }

    /// Parks slot `i` (out of the heap) in its origin's queue.
    mutating func park(_ i: UInt32) {
        let o = origin(ofSlot: i)
        assert(slots[Int(i)].heapIndex == Self.notInHeap && !slots[Int(i)].flags.contains(.parked))
        slots[Int(i)].flags.insert(.parked)
        origins[o].parked.append(i)
        origins[o].parkedCount += 1
        if !origins.isDown(o) && !origins.holding.contains(o) { origins.holding.append(o) }
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

    /// The oldest parked slot of origin `o`, left in place.
    func firstParked(_ o: UInt32) -> UInt32? {
        origins[o].parked.first { isParked($0, at: o) }
    }

    /// Marks slot `i` in flight as a delivery to its destination: it counts toward the limit,
    /// and moves the pace on.
    mutating func startSending(_ i: UInt32, nowMilliseconds now: UInt64) {
        let o = origin(ofSlot: i)
        slots[Int(i)].flags.formUnion([.inFlight, .sending])
        slots[Int(i)].flags.remove(.pacedRetry)
        origins[o].sending += 1
        origins.concurrency.started(&origins[o].flow, nowMilliseconds: now)
    }

    /// Slot `i`'s delivery is over (or it was never one): its destination's count drops.
    mutating func stopSending(_ i: UInt32) {
        guard slots[Int(i)].flags.contains(.sending) else { return }
        slots[Int(i)].flags.remove(.sending)
        origins[origin(ofSlot: i)].sending -= 1
        assert(origins[origin(ofSlot: i)].sending >= 0)
    }

    /// If slot `i` is its destination's probe, the probe is over (its outcome is recorded by
    /// `observe`, which runs first; here only the marker is cleared, e.g. on cancellation).
    mutating func endProbe(_ i: UInt32) {
        let o = origin(ofSlot: i)
        if origins[o].outage?.probe == i { origins[o].outage!.probe = nil }
    }

    /// How many failures in a row of slot `i`'s message its destination's rate explains: the
    /// rate of its latest answers to other messages (`AnswerWindow`).
    func explainedFailures(
        ofSlot i: UInt32, _ explanation: RetryPolicy.ExplainedFailures, nowMilliseconds now: UInt64
    ) -> Int {
        origins[origin(ofSlot: i)].answers.explainedFailures(of: slots[Int(i)].order, explanation, nowMilliseconds: now)
    }

    /// An upload that ended while the app was dead, heard late (its hand-off was given up): its
    /// destination has reported, and answered if `status` says it is up. Nothing else is learned
    /// (its start and latency are unknown).
    mutating func noteLateReport(of id: MessageID, status: UInt16?, nowMilliseconds now: UInt64) {
        guard let i = slotIndex(of: id) else { return }
        let o = origin(ofSlot: i)
        origins[o].hasReported = true
        // Up as `DestinationBackoff` counts it (a 4xx other than 408 and 429 is the message's).
        if let status, status < 500, status != 408, status != 429, origins[o].outage == nil {
            origins[o].lastHealthyMilliseconds = now
        }
    }

    /// Records what an attempt of slot `i` said about its destination.
    mutating func observe(_ report: DestinationReport, slot i: UInt32) -> DestinationChange {
        let o = origin(ofSlot: i), now = report.nowMilliseconds
        let answering =
            origins[o].outage == nil
            && origins[o].lastHealthyMilliseconds.map {
                now <= $0 + ConcurrencyLimit.answeredWithinMilliseconds
            } ?? false
        let policy = origins.concurrency, maximum = origins.maximumConcurrency
        if report.signal != .neutral { origins[o].hasReported = true }
        switch report.signal {
        case .healthy:
            origins[o].consecutiveFailures = 0
            origins[o].lastHealthyMilliseconds = now
            // A 4xx is the message's own problem: neither a success nor a failure of the server.
            if report.succeeded {
                origins[o].answers.record(message: slots[Int(i)].order, failed: false, nowMilliseconds: now)
                origins.budget.succeeded(&origins[o].tokens, nowMilliseconds: now)
            }
            guard let outage = origins.markUp(o) else {
                policy.succeeded(
                    &origins[o].flow, latencyMilliseconds: report.latencyMilliseconds,
                    startedMilliseconds: report.startedMilliseconds, sending: origins[o].sending,
                    nowMilliseconds: now, maximum: maximum)
                return .none
            }
            policy.recovered(&origins[o].flow, maximum: maximum)
            let released = holdParked(of: o, nowMilliseconds: now)
            return .recovered(
                origin: origins[o].name, downMilliseconds: now - min(now, outage.sinceMilliseconds),
                released: released)
        case .overloaded where answering:
            policy.refused(
                &origins[o].flow, retryAfterMilliseconds: report.retryAfterMilliseconds,
                startedMilliseconds: report.startedMilliseconds, nowMilliseconds: now, maximum: maximum)
            return policy.isAdaptive ? .limited : .none
        case .timedOut where answering:
            policy.timedOut(
                &origins[o].flow, startedMilliseconds: report.startedMilliseconds, nowMilliseconds: now,
                maximum: maximum)
            return fail(slot: i, origin: o, report)
        case .failing where answering && report.wasAnswered:
            policy.served(&origins[o].flow, nowMilliseconds: now)
            return fail(slot: i, origin: o, report)
        case .overloaded, .timedOut, .failing:
            return fail(slot: i, origin: o, report)
        case .neutral:
            if let outage = origins[o].outage, outage.probe == i {
                origins[o].outage!.probe = nil
                let delay = report.probeDelayMilliseconds(outage.probeAttempt)
                origins[o].outage!.nextProbeMilliseconds = now + delay
            }
            return .none
        }
    }

    /// A failing outcome: a failed probe pushes the next one out; enough in a row make the
    /// destination down.
    private mutating func fail(slot i: UInt32, origin o: UInt32, _ report: DestinationReport) -> DestinationChange {
        let now = report.nowMilliseconds
        origins[o].consecutiveFailures += 1
        origins[o].answers.record(message: slots[Int(i)].order, failed: true, nowMilliseconds: now)
        if let outage = origins[o].outage {
            if outage.probe == i {
                origins[o].outage!.probe = nil
                origins[o].outage!.failedProbes += 1
                let delay = report.probeDelayMilliseconds(origins[o].outage!.probeAttempt)
                origins[o].outage!.nextProbeMilliseconds = now + delay
            }
            return .none
        }
        let failures = origins[o].consecutiveFailures
        guard report.failuresBeforeDown > 0, failures >= report.failuresBeforeDown else { return .none }
        // A run the destination's rate before it explains is luck, not an outage.
        let explained = origins[o].answers.explainedRun(
            beforeLatest: failures, origins.explanation, nowMilliseconds: now)
        guard failures >= report.failuresBeforeDown + explained else { return .none }
        // The failure that tipped it counts as the first failed probe; the rate that explained
        // some of the run explains as many failed probes.
        origins.markDown(
            o,
            outage: OriginTable.Outage(
                sinceMilliseconds: now, failedProbes: 1, explainedFailures: explained,
                nextProbeMilliseconds: now + report.probeDelayMilliseconds(1)))
        return .wentDown(origin: origins[o].name, consecutiveFailures: failures)
    }

    /// The destination is back: every parked message becomes due now at the latest (attempt
    /// counts kept) and stays in its origin's queue, held: `takeNext` releases them oldest
    /// first, as the destination's limit and pace allow. (Moving them all into the heap, as this
    /// did, cost a push each, then at the next plan a pop and a park again for all but the few
    /// the limit let through: two heap operations per backlogged message per outage, under the
    /// core's lock.) Returns how many.
    private mutating func holdParked(of o: UInt32, nowMilliseconds now: UInt64) -> Int {
        // Bounded by the queue's length; stale entries (no longer parked here) are skipped.
        for i in origins[o].parked.entries where isParked(i, at: o) {
            slots[Int(i)].dueMilliseconds = min(slots[Int(i)].dueMilliseconds, now)
        }
        if origins[o].parkedCount > 0 && !origins.holding.contains(o) { origins.holding.append(o) }
        return origins[o].parkedCount
    }
}

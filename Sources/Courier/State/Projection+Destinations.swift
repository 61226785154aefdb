/// Backoff per destination (see `OriginTable`): parking the messages of a destination that is
/// down, taking one of them at a time as its probe, and bringing them all back when it answers.
extension Projection {
    /// What one attempt's outcome says about its destination (`DestinationBackoff.signal`).
    enum DestinationSignal: Equatable {
        /// The server answered something other than 5xx, 429 or 408: it is up.
        case healthy
        /// A connection error, a timeout, TLS, 5xx, 429 or 408: the destination is in trouble.
        case failing
        /// Says nothing about the destination (a local failure, e.g. `prepareRequest` threw).
        case neutral
    }

    /// What an observation changed, for the outbox to report as an event.
    enum DestinationChange: Equatable {
        case none
        case wentDown(origin: String, consecutiveFailures: Int)
        case recovered(origin: String, downMilliseconds: UInt64, released: Int)
    }

    func origin(ofSlot i: UInt32) -> UInt32 { destinations.origin(slots[Int(i)].destination) }

    /// The origin name ("https://host:443") of message `id`, if pending.
    func originName(of id: MessageID) -> String? {
        lookup(id).map { origins[origin(ofSlot: $0)].name }
    }

    /// Puts a slot that is not in the heap where it belongs: parked if its destination is
    /// down, else in the heap.
    mutating func makeSchedulable(_ i: UInt32) {
        assert(slots[Int(i)].heapIndex == Self.notInHeap)
        if origins.isDown(origin(ofSlot: i)) { park(i) } else { heapPush(i) }
    }

    mutating func park(_ i: UInt32) {
        let o = origin(ofSlot: i)
        assert(slots[Int(i)].heapIndex == Self.notInHeap && origins.isDown(o))
        slots[Int(i)].flags.insert(.parked)
        origins[o].outage!.parked.append(i)
        origins[o].outage!.parkedCount += 1
    }

    /// Bookkeeping for a slot leaving the parked state other than by `unparkAll` or a probe
    /// (its message was removed). The queue entry goes stale; pops skip it.
    mutating func unparked(_ i: UInt32) {
        let o = origin(ofSlot: i)
        slots[Int(i)].flags.remove(.parked)
        if origins.isDown(o) { origins[o].outage!.parkedCount -= 1 }
    }

    /// If slot `i` is its destination's probe, the probe is over (its outcome is recorded by
    /// `observe`, which runs first; here only the marker is cleared, e.g. on cancellation).
    mutating func endProbe(_ i: UInt32) {
        let o = origin(ofSlot: i)
        if origins[o].outage?.probe == i { origins[o].outage!.probe = nil }
    }

    /// Takes the next probe due at `nowMilliseconds`: one parked message of a down destination
    /// whose probe time has come and that has no probe in flight. Marks it in flight.
    mutating func takeProbe(nowMilliseconds: UInt64) -> Slot? {
        for o in origins.down {
            guard let outage = origins[o].outage, outage.probe == nil, outage.parkedCount > 0,
                  outage.nextProbeMilliseconds <= nowMilliseconds else { continue }
            // Stale entries are skipped; the queue holds at most every slot once per parking.
            while let i = origins[o].outage!.parked.popFirst() {
                guard slots[Int(i)].flags.contains(.parked), origin(ofSlot: i) == o else { continue }
                slots[Int(i)].flags.remove(.parked)
                slots[Int(i)].flags.insert(.inFlight)
                origins[o].outage!.parkedCount -= 1
                origins[o].outage!.probe = i
                return slots[Int(i)]
            }
            assertionFailure("parkedCount said a slot was parked")
        }
        return nil
    }

    /// Records what an attempt of slot `i` said about its destination.
    /// - Parameters:
    ///   - failuresBeforeDown: consecutive failures that make a destination down (0: never).
    ///   - probeDelayMilliseconds: the policy's delay after `n` failed probes (pure: no user
    ///     code runs under the outbox's lock).
    mutating func observe(_ signal: DestinationSignal, slot i: UInt32, nowMilliseconds now: UInt64,
                          failuresBeforeDown: Int, probeDelayMilliseconds: (Int) -> UInt64) -> DestinationChange {
        let o = origin(ofSlot: i)
        switch signal {
        case .healthy:
            origins[o].consecutiveFailures = 0
            guard let outage = origins.markUp(o) else { return .none }
            let released = unparkAll(outage, of: o, nowMilliseconds: now)
            return .recovered(origin: origins[o].name, downMilliseconds: now - min(now, outage.sinceMilliseconds),
                              released: released)
        case .failing:
            origins[o].consecutiveFailures += 1
            if let outage = origins[o].outage {
                if outage.probe == i {
                    origins[o].outage!.probe = nil
                    origins[o].outage!.failedProbes += 1
                    origins[o].outage!.nextProbeMilliseconds = now + probeDelayMilliseconds(outage.failedProbes + 1)
                }
                return .none
            }
            let failures = origins[o].consecutiveFailures
            guard failuresBeforeDown > 0, failures >= failuresBeforeDown else { return .none }
            // The failure that tipped it counts as the first failed probe.
            origins.markDown(o, outage: OriginTable.Outage(sinceMilliseconds: now, failedProbes: 1,
                                                          nextProbeMilliseconds: now + probeDelayMilliseconds(1)))
            return .wentDown(origin: origins[o].name, consecutiveFailures: failures)
        case .neutral:
            if let outage = origins[o].outage, outage.probe == i {
                origins[o].outage!.probe = nil
                origins[o].outage!.nextProbeMilliseconds = now + probeDelayMilliseconds(max(1, outage.failedProbes))
            }
            return .none
        }
    }

    /// The destination is back: every parked message becomes due now at the latest (attempt
    /// counts kept) and goes back into the heap. Returns how many.
    private mutating func unparkAll(_ outage: OriginTable.Outage, of o: UInt32, nowMilliseconds now: UInt64) -> Int {
        var queue = outage.parked
        var released = 0
        // Bounded by the queue's length: each entry is popped once.
        while let i = queue.popFirst() {
            guard slots[Int(i)].flags.contains(.parked), origin(ofSlot: i) == o else { continue }
            slots[Int(i)].flags.remove(.parked)
            slots[Int(i)].dueMilliseconds = min(slots[Int(i)].dueMilliseconds, now)
            reschedule(i)
            released += 1
        }
        assert(released == outage.parkedCount, "parkedCount tracks the parked slots exactly")
        return released
    }
}

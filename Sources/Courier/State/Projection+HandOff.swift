/// Choosing messages for a background upload session (`Courier.BackgroundUploads`).
extension Projection {
    /// A message taken for hand-off, and the earliest time its upload may begin.
    struct HandOffCandidate {
        var slot: Slot
        var beginMilliseconds: UInt64
    }

    /// Takes up to `limit` messages to hand off, marking them in flight: first, for each
    /// destination that is down and has no probe in flight, its next parked message (to begin
    /// at the probe time: destination backoff holds while the app is suspended); then
    /// schedulable messages in due order, whatever their due time (the session waits for it).
    /// Only lane heads are ever schedulable, so ordering keys hold. No destination gets more
    /// uploads at once than its concurrency limit allows. Messages for which `skip`
    /// is true stay where they are (a down destination whose next message is skipped sends no
    /// probe from the background).
    mutating func takeForHandOff(
        limit: Int, nowMilliseconds now: UInt64,
        skip: (Slot, String) -> Bool
    ) -> [HandOffCandidate] {
        var taken: [HandOffCandidate] = []
        for o in origins.down where taken.count < limit {
            guard let outage = origins[o].outage, outage.probe == nil, let i = firstParked(o),
                !skip(slots[Int(i)], url(of: slots[Int(i)]))
            else { continue }
            unparked(i)
            startSending(i, nowMilliseconds: now)
            origins[o].outage!.probe = i
            taken.append(HandOffCandidate(slot: slots[Int(i)], beginMilliseconds: outage.nextProbeMilliseconds))
        }
        // Messages parked by a destination's limit: the oldest, while the limit allows (the
        // pace sets their begin dates).
        for o in origins.holding where !origins.isDown(o) {
            // Each turn parks nothing new and takes one slot: bounded by the queue.
            while taken.count < limit, origins[o].sending < origins[o].flow.count, let i = firstParked(o),
                !skip(slots[Int(i)], url(of: slots[Int(i)]))
            {
                unparked(i)
                taken.append(start(i, forHandOffAt: now))
            }
        }
        var skipped: [UInt32] = []
        // Each turn removes one slot from the heap: bounded by its size.
        while taken.count < limit, let top = heap.first {
            heapRemove(top)
            let o = origin(ofSlot: top)
            if skip(slots[Int(top)], url(of: slots[Int(top)])) {
                skipped.append(top)
            } else if origins.isDown(o) || origins[o].sending >= origins[o].flow.count {
                park(top)  // its destination went down since it entered the heap, or is at its limit
            } else {
                taken.append(start(top, forHandOffAt: now))
            }
        }
        for i in skipped { heapPush(i) }
        return taken
    }

    /// Marks slot `i` in flight as an upload; it begins when due, and no sooner than its
    /// destination's pace allows.
    private mutating func start(_ i: UInt32, forHandOffAt now: UInt64) -> HandOffCandidate {
        let o = origin(ofSlot: i)
        let paced = origins[o].flow.nextStartMilliseconds
        startSending(i, nowMilliseconds: max(now, slots[Int(i)].dueMilliseconds))
        let begin = max(slots[Int(i)].dueMilliseconds, UInt64(max(0, paced.rounded(.up))))
        return HandOffCandidate(slot: slots[Int(i)], beginMilliseconds: begin)
    }
}

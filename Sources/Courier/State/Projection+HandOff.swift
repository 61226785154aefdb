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
    /// Only lane heads are ever schedulable, so ordering keys hold. Messages for which `skip`
    /// is true stay where they are (a down destination whose next message is skipped sends no
    /// probe from the background).
    mutating func takeForHandOff(limit: Int, skip: (Slot, String) -> Bool) -> [HandOffCandidate] {
        var taken: [HandOffCandidate] = []
        for o in origins.down where taken.count < limit {
            guard let outage = origins[o].outage, outage.probe == nil, outage.parkedCount > 0 else { continue }
            // Stale entries are skipped; bounded by the queue's length.
            while let i = origins[o].outage!.parked.first {
                guard slots[Int(i)].flags.contains(.parked), origin(ofSlot: i) == o else {
                    _ = origins[o].outage!.parked.popFirst()
                    continue
                }
                guard !skip(slots[Int(i)], url(of: slots[Int(i)])) else { break }
                _ = origins[o].outage!.parked.popFirst()
                slots[Int(i)].flags.remove(.parked)
                slots[Int(i)].flags.insert(.inFlight)
                origins[o].outage!.parkedCount -= 1
                origins[o].outage!.probe = i
                taken.append(HandOffCandidate(slot: slots[Int(i)], beginMilliseconds: outage.nextProbeMilliseconds))
                break
            }
        }
        var skipped: [UInt32] = []
        // Each turn removes one slot from the heap: bounded by its size.
        while taken.count < limit, let top = heap.first {
            heapRemove(top)
            if skip(slots[Int(top)], url(of: slots[Int(top)])) {
                skipped.append(top)
            } else if origins.isDown(origin(ofSlot: top)) {
                park(top)  // its destination went down since it entered the heap
            } else {
                slots[Int(top)].flags.insert(.inFlight)
                taken.append(HandOffCandidate(slot: slots[Int(top)], beginMilliseconds: slots[Int(top)].dueMilliseconds))
            }
        }
        for i in skipped { heapPush(i) }
        return taken
    }
}

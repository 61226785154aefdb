import Foundation

/// How many deliveries may be under way to one destination (scheme, host and port) at once,
/// and, once it has refused some for load, how fast new ones may start. A pure value, like
/// `RetryPolicy`: the transitions below take the time and the outcome and return the next state.
///
/// **`.adaptive`** (the default) learns each destination's limit, the way TCP learns its
/// congestion window and Netflix's concurrency-limits learns a server's:
///
/// | signal | concurrency limit | pace of new requests |
/// |---|---|---|
/// | a new destination | `initialLimit` (4): starts low | none |
/// | 2xx, with latency holding | grows (1) | grows (2) |
/// | 429 or 503 from a destination that answered 2xx in the last 10 s | × `backoffRatio` (0.5) (3) | set (4) |
/// | a timeout from such a destination | × `backoffRatio` | unchanged |
/// | latency (short-term average) above `latencyTolerance` (2) × its long-term average | × 0.9 | unchanged |
/// | 429, 503, timeouts with no 2xx in 10 s | unchanged: it is an outage (`DestinationBackoff`) | unchanged |
///
/// 1. +1 per success until the first cut (doubles each round trip: slow start), then +1 per
///    round trip.
/// 2. +0.5 request/s per success until the first cut (50 % a second), then +0.04 (4 %) up to
///    10 % past the pace of the last cut, +0.1 (10 %) beyond.
/// 3. Never below what the pace needs.
/// 4. At the rate the server served over the last second, then × 0.8 per refusal, never below
///    that rate (at once down to it, if far above); `Retry-After` holds the whole destination
///    that long.
///
/// Without `Retry-After`, refusals cut only when they are at least 1 in 10 answers over the
/// last second or two: a server that refuses now and then at random is not a limiter.
/// At most one cut per round trip: a refusal of a request that started before the last cut says
/// nothing new (the burst that caused it is already answered). Growth needs the limit in use
/// (at least half of it in flight), so a trickle of messages never inflates it. The limit stays
/// within `minimumLimit…maximumConcurrentDeliveries`. A paced destination is un-paced once its
/// rate passes 1,000 requests/s.
///
/// Why pace at all: a concurrency limit alone cannot hold a request rate. On a fast network one
/// request in flight already makes hundreds a second, far above a limiter that allows 20.
/// Without pacing, a 20/s limiter refused more requests than it served (`make bench-drain`;
/// figures in <doc:RetryAndBackoff>).
///
/// **`.fixed`** keeps exactly `maximumConcurrentDeliveries` in flight to each destination (and
/// in all), never paces, and retries a refused message on its own backoff, as a failure.
public struct ConcurrencyLimit: Sendable, Hashable {
    /// Whether the limit adapts per destination. The default is true.
    public var isAdaptive: Bool
    /// The limit for a destination not heard from yet. The default is 4 (the per-host
    /// connection counts of browsers and URLSession are 4–6; slow start doubles it each round
    /// trip while the destination answers).
    public var initialLimit: Int
    /// The least the limit is cut to. The default is 1.
    public var minimumLimit: Int
    /// The factor a refusal for load or a timeout cuts the limit by. The default is 0.5 (TCP's).
    public var backoffRatio: Double
    /// How far latency may climb over its long-term average before the limit is cut. The
    /// default is 2 (Gradient2's): a server answering in 0–400 ms at random is not "climbing".
    public var latencyTolerance: Double

    /// A limit with the given settings (the defaults: adaptive, from 4, at least 1, × 0.5, 2×).
    /// `Courier.init` checks them (`CourierError.Code.invalidConfiguration`).
    public init(
        isAdaptive: Bool = true, initialLimit: Int = 4, minimumLimit: Int = 1,
        backoffRatio: Double = 0.5, latencyTolerance: Double = 2
    ) {
        self.isAdaptive = isAdaptive
        self.initialLimit = initialLimit
        self.minimumLimit = minimumLimit
        self.backoffRatio = backoffRatio
        self.latencyTolerance = latencyTolerance
    }

    /// Learns each destination's limit and pace (the table above). The default.
    public static let adaptive = ConcurrencyLimit()
    /// Exactly `maximumConcurrentDeliveries` in flight, to each destination and in all.
    public static let fixed = ConcurrencyLimit(isAdaptive: false)

    /// A 429 or 503 counts as load only from a destination that answered 2xx this recently;
    /// otherwise it is an outage's failure (`DestinationBackoff`).
    static let answeredWithinMilliseconds: UInt64 = 10_000
    /// Above this pace, pacing ends: a 1 ms spacing is no pacing at all.
    static let unpacedRatePerSecond = 1_000.0
    static let minimumRatePerSecond = 0.2
    static let rateCutRatio = 0.8
    static let latencyCutRatio = 0.9
}

extension ConcurrencyLimit {
    /// One destination's learned state. Times are wall milliseconds.
    struct Flow: Hashable {
        var limit: Double
        /// Below it, the limit grows by one per success (slow start); above, by one per round.
        var slowStartThreshold: Double
        /// When the last cut happened: outcomes of requests that started before say nothing new.
        var lastCutMilliseconds: UInt64?
        var shortLatencyMilliseconds = 0.0
        var longLatencyMilliseconds = 0.0
        var latencySamples = 0
        /// Requests per second that may start; nil while not paced.
        var ratePerSecond: Double?
        /// Whether the pace is still doubling (no cut since pacing began).
        var rateSlowStart = true
        /// The pace when it was last cut: growth slows near it.
        var rateAtLastCut: Double?
        /// The earliest time the next request may start (pace, `Retry-After`).
        var nextStartMilliseconds: Double = 0
        /// Requests served (answered, other than a refusal for load) in the current and the
        /// previous one-second window: the rate the server takes.
        var windowStartMilliseconds: UInt64 = 0
        var successesThisWindow = 0
        var successesLastWindow = 0
        /// Refusals for load in the same windows.
        var refusedThisWindow = 0
        var refusedLastWindow = 0

        /// The limit as a count of requests.
        var count: Int { Int(limit) }
    }

    /// The state of a destination not heard from yet.
    func initialFlow(maximum: Int) -> Flow {
        let start = Double(isAdaptive ? min(initialLimit, maximum) : maximum)
        return Flow(limit: start, slowStartThreshold: Double(maximum))
    }

    /// Whether one more request may start now, with `sending` under way.
    func mayStart(_ flow: Flow, sending: Int, nowMilliseconds now: UInt64) -> Bool {
        sending < flow.count && flow.nextStartMilliseconds <= Double(now)
    }

    /// The earliest a request may start, if only the pace (not the limit) holds it back.
    func nextStart(_ flow: Flow, sending: Int) -> UInt64? {
        sending < flow.count ? UInt64(flow.nextStartMilliseconds.rounded(.up)) : nil
    }

    /// The earliest a request may start by the pace alone (`Retry-After` included), whatever
    /// is under way.
    func paceStart(_ flow: Flow) -> UInt64 { UInt64(flow.nextStartMilliseconds.rounded(.up)) }

    /// A request starts: the pace moves the next start on by one interval.
    func started(_ flow: inout Flow, nowMilliseconds now: UInt64) {
        guard let rate = flow.ratePerSecond else { return }
        flow.nextStartMilliseconds = max(flow.nextStartMilliseconds, Double(now)) + 1_000 / rate
    }

    /// A 2xx: count it toward the accepted rate, grow, and watch latency. `sending` counts the
    /// deliveries under way, this one included.
    func succeeded(
        _ flow: inout Flow, latencyMilliseconds: UInt64?, startedMilliseconds: UInt64, sending: Int,
        nowMilliseconds now: UInt64, maximum: Int
    ) {
        countSuccess(&flow, nowMilliseconds: now)
        guard isAdaptive else { return }
        if let latency = latencyMilliseconds.map({ Double($0) }) {
            flow.latencySamples += 1
            if flow.latencySamples == 1 {
                flow.shortLatencyMilliseconds = latency
                flow.longLatencyMilliseconds = latency
            } else {
                flow.shortLatencyMilliseconds += (latency - flow.shortLatencyMilliseconds) * 0.2
                flow.longLatencyMilliseconds += (latency - flow.longLatencyMilliseconds) * 0.02
            }
            if flow.latencySamples >= 20, isFresh(flow, startedMilliseconds),
                flow.shortLatencyMilliseconds > latencyTolerance * max(1, flow.longLatencyMilliseconds)
            {
                cut(&flow, by: Self.latencyCutRatio, nowMilliseconds: now, maximum: maximum)
                return
            }
        }
        if let rate = flow.ratePerSecond {
            flow.ratePerSecond = grownRate(rate, flow)
        }
        // Grow only a limit in use (TCP's window validation): a trickle proves nothing.
        guard Double(sending) * 2 >= flow.limit else { return }
        let step = flow.limit < flow.slowStartThreshold ? 1 : 1 / flow.limit
        flow.limit = min(Double(maximum), flow.limit + step)
    }

    /// A 429 or 503 from a destination that is answering: cut the limit and the pace (once per
    /// round trip), and hold the destination for `Retry-After`.
    func refused(
        _ flow: inout Flow, retryAfterMilliseconds: UInt64?, startedMilliseconds: UInt64,
        nowMilliseconds now: UInt64, maximum: Int
    ) {
        guard isAdaptive else { return }
        roll(&flow, nowMilliseconds: now)
        flow.refusedThisWindow += 1
        if let wait = retryAfterMilliseconds {
            flow.nextStartMilliseconds = max(flow.nextStartMilliseconds, Double(now + wait))
        }
        guard isFresh(flow, startedMilliseconds) else { return }
        // Without `Retry-After`, a refusal now and then (fewer than 1 in 10 answers over the
        // last second or two) is not a limiter's: a server that refuses at random would
        // otherwise ratchet the pace down, each cut deeper than the growth between refusals.
        // A server that sends `Retry-After` asks for the wait itself: each refusal counts.
        let refusals = flow.refusedThisWindow + flow.refusedLastWindow
        let served = flow.successesThisWindow + flow.successesLastWindow
        guard retryAfterMilliseconds != nil || refusals * 10 >= served else { return }
        // What the server served over the last second: the first estimate of its pace, and a
        // floor under later cuts (a pace far above it comes down at once, not 20 % per refusal).
        let accepted = Double(max(flow.successesThisWindow, flow.successesLastWindow))
        if let rate = flow.ratePerSecond {
            flow.rateAtLastCut = rate
            flow.ratePerSecond = max(Self.minimumRatePerSecond, min(rate * Self.rateCutRatio, max(accepted, rate / 2)))
            flow.rateSlowStart = false
        } else {
            // No 2xx in the last two seconds (a trickle of messages): one a second to start.
            flow.ratePerSecond = max(1, accepted)
        }
        cut(&flow, by: backoffRatio, nowMilliseconds: now, maximum: maximum)
        // The server's bucket is empty now: the next request waits one interval, or it would
        // be refused at once and cut the pace again before the pace was ever tried.
        if let rate = flow.ratePerSecond {
            flow.nextStartMilliseconds = max(flow.nextStartMilliseconds, Double(now) + 1_000 / rate)
        }
    }

    /// An HTTP answer other than 2xx or a refusal for load (a 500, say): the server served it,
    /// so it counts toward the rate the server takes.
    func served(_ flow: inout Flow, nowMilliseconds now: UInt64) {
        countSuccess(&flow, nowMilliseconds: now)
    }

    /// A timeout from a destination that is answering: too much in flight for it.
    func timedOut(_ flow: inout Flow, startedMilliseconds: UInt64, nowMilliseconds now: UInt64, maximum: Int) {
        guard isAdaptive, isFresh(flow, startedMilliseconds) else { return }
        cut(&flow, by: backoffRatio, nowMilliseconds: now, maximum: maximum)
    }

    /// A destination came back from an outage: what was learned of its load is stale, so it
    /// starts again as if new (the outage itself taught nothing about its capacity).
    func recovered(_ flow: inout Flow, maximum: Int) {
        guard isAdaptive else { return }
        flow = initialFlow(maximum: maximum)
    }

    /// The pace after one more success: +50 % a second until the first cut; then +4 % from the
    /// cut up to 10 % past the pace where the server refused, +10 % a second beyond (CUBIC's
    /// plateau: each overshoot costs a refusal, and with `Retry-After` a held second).
    private func grownRate(_ rate: Double, _ flow: Flow) -> Double? {
        let step: Double
        if flow.rateSlowStart {
            step = 0.5
        } else if let last = flow.rateAtLastCut, rate >= last * Self.rateCutRatio * 0.95 && rate <= last * 1.1 {
            step = 0.04
        } else {
            step = 0.1
        }
        let grown = rate + step
        return grown >= Self.unpacedRatePerSecond ? nil : grown
    }

    private func isFresh(_ flow: Flow, _ startedMilliseconds: UInt64) -> Bool {
        flow.lastCutMilliseconds.map { startedMilliseconds > $0 } ?? true
    }

    /// Cuts the limit by `ratio`, never below `minimumLimit` nor below what the pace needs in
    /// flight (rate × latency, Little's law, with room for jitter).
    private func cut(_ flow: inout Flow, by ratio: Double, nowMilliseconds now: UInt64, maximum: Int) {
        var floor = Double(minimumLimit)
        if let rate = flow.ratePerSecond {
            floor = max(floor, (rate * flow.shortLatencyMilliseconds / 1_000 * 2).rounded(.up))
        }
        flow.limit = min(Double(maximum), max(floor, flow.limit * ratio))
        flow.slowStartThreshold = flow.limit
        flow.lastCutMilliseconds = now
    }

    private func countSuccess(_ flow: inout Flow, nowMilliseconds now: UInt64) {
        roll(&flow, nowMilliseconds: now)
        flow.successesThisWindow += 1
    }

    /// Moves the one-second windows on to `now`.
    private func roll(_ flow: inout Flow, nowMilliseconds now: UInt64) {
        if now >= flow.windowStartMilliseconds + 2_000 {
            flow.windowStartMilliseconds = now
            flow.successesLastWindow = 0
            flow.successesThisWindow = 0
            flow.refusedLastWindow = 0
            flow.refusedThisWindow = 0
        } else if now >= flow.windowStartMilliseconds + 1_000 {
            flow.windowStartMilliseconds += 1_000
            flow.successesLastWindow = flow.successesThisWindow
            flow.successesThisWindow = 0
            flow.refusedLastWindow = flow.refusedThisWindow
            flow.refusedThisWindow = 0
        }
    }
}

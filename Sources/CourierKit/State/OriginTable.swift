import Foundation

/// The health of each destination (origin: scheme, host and port) that messages go to. Pure
/// data, part of `Projection`, guarded by the core's lock; in memory only (after a restart
/// every destination starts healthy, and a dead one is found again within a few attempts).
///
/// A destination is *down* after `DestinationBackoff.failuresBeforeDown` consecutive failing
/// attempts (no success in between). While down, its messages are *parked*: out of the heap,
/// waiting in the origin's queue, and one at a time is taken as a probe when `nextProbe` comes.
/// A failed probe pushes `nextProbe` out by the retry policy (attempt = failed probes); any
/// healthy answer brings the destination back and makes every parked message due at once.
///
/// A destination that is up has a concurrency limit and, once it refused some requests for
/// load, a pace (`ConcurrencyLimit`). A due message it cannot take yet is parked too, and taken
/// from its queue, oldest first, as soon as a delivery ends or the pace allows.
struct OriginTable {
    struct Outage {
        /// The attempt number whose backoff spaces the probe after `failedProbes` failed ones.
        var probeAttempt: Int { max(1, failedProbes - explainedFailures) }

        /// Wall time (ms) when it went down.
        var sinceMilliseconds: UInt64
        /// Probes that failed since; the next probe's delay is the policy's for this attempt, less
        /// `explainedFailures`.
        var failedProbes: Int
        /// How many failures in a row the destination's rate explained when it went down
        /// (`RetryPolicy.ExplainedFailures`): so many failed probes are luck, and do not grow the
        /// probe delay (a server failing 90% at random is probed about every second, as the
        /// retry budget allows, not every minute).
        var explainedFailures = 0
        var nextProbeMilliseconds: UInt64
        /// The slot being probed, if a probe is in flight.
        var probe: UInt32?
    }

    struct Entry {
        /// "https://host:443": how events name it.
        var name: String
        var consecutiveFailures = 0
        /// Whether any attempt has said something about it (an answer, or a failure) since the
        /// courier opened: a hand-off to a destination that has not sends only its first limit's
        /// worth, and the app waits for those answers (`awaitsFirstAnswers`).
        var hasReported = false
        var outage: Outage?
        /// Parked slots, oldest first: due, but held back by an outage (until a probe is
        /// answered) or by the concurrency limit or pace (until a slot or the pace allows).
        /// Entries may be stale (a slot unparked or freed since): `parkedCount` is the exact
        /// number, and every pop re-checks the slot's flags.
        var parked = SlotQueue()
        var parkedCount = 0
        /// Deliveries under way (engine attempts and background uploads).
        var sending = 0
        /// The last 2xx (wall ms): a 429 or 503 soon after it is load, not an outage.
        var lastHealthyMilliseconds: UInt64?
        /// What the concurrency policy has learned of it.
        var flow: ConcurrencyLimit.Flow
        /// Its latest answers, for its failure rate (`RetryPolicy.ExplainedFailures`).
        var answers: AnswerWindow
        /// Its retry budget's tokens (`RetryBudget`).
        var tokens: RetryBudget.Bucket
    }

    private(set) var entries: [Entry] = []
    private var indexByName: [String: UInt32] = [:]
    /// Origins with an outage, so scheduling never scans every origin. Few at any time.
    private(set) var down: [UInt32] = []
    /// Origins that may have parked slots while up (held by their limit or pace). May hold
    /// origins with none left; `takeNext` drops them. Few at any time.
    var holding: [UInt32] = []
    /// The concurrency policy, and its bound (`maximumConcurrentDeliveries`).
    var concurrency = ConcurrencyLimit.fixed
    var maximumConcurrency = 1_000
    /// How failure rates explain failures (`RetryPolicy.ExplainedFailures`): how many answers
    /// each origin keeps, and how many failures in a row do not count toward an outage.
    var explanation = RetryPolicy.ExplainedFailures.disabled
    /// What a retry or a probe costs, and how tokens come back.
    var budget = RetryBudget.disabled

    /// The index of the origin `url` belongs to, adding it if new. Called once per distinct URL
    /// (the URL table interns first), so parsing here is off the per-message path.
    mutating func intern(url: String) -> UInt32 {
        let name = Self.origin(of: url)
        if let known = indexByName[name] { return known }
        // Bounded by the distinct origins an app posts to; never freed (a few hundred bytes each).
        entries.append(
            Entry(
                name: name, flow: concurrency.initialFlow(maximum: maximumConcurrency),
                answers: AnswerWindow(capacity: explanation.isEnabled ? explanation.window : 0),
                tokens: budget.fullBucket))
        indexByName[name] = UInt32(entries.count - 1)
        return UInt32(entries.count - 1)
    }

    /// The URL of an origin's name (`origin(of:)`): what events carry.
    static func url(of origin: String) -> URL {
        URL(string: origin) ?? URL(fileURLWithPath: "/")  // a name made from a valid URL parses
    }

    /// "scheme://host:port", lowercased, with the scheme's default port made explicit, so
    /// `https://A.example/x` and `https://a.example:443/y` are one destination.
    static func origin(of url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased()
        else { return url }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }

    subscript(_ origin: UInt32) -> Entry {
        get { entries[Int(origin)] }
        // In place: with a setter alone, `origins[o].parked.append(i)` would copy the entry,
        // and with it the parked queue (the array's second owner), on every park: a backlog
        // parked behind its destination's limit cost O(n) per message.
        _modify { yield &entries[Int(origin)] }
    }

    func isDown(_ origin: UInt32) -> Bool { entries[Int(origin)].outage != nil }

    mutating func markDown(_ origin: UInt32, outage: Outage) {
        assert(entries[Int(origin)].outage == nil, "an origin goes down once per outage")
        entries[Int(origin)].outage = outage
        down.append(origin)
    }

    /// Ends the outage; returns it (the caller unparks the parked queue).
    mutating func markUp(_ origin: UInt32) -> Outage? {
        guard let outage = entries[Int(origin)].outage else { return nil }
        entries[Int(origin)].outage = nil
        down.removeAll { $0 == origin }
        return outage
    }

    /// The earliest time a probe may start, over origins that have something parked and no
    /// probe in flight.
    var earliestProbe: UInt64? {
        down.lazy.compactMap { o -> UInt64? in
            guard let outage = entries[Int(o)].outage, outage.probe == nil,
                entries[Int(o)].parkedCount > 0
            else { return nil }
            return outage.nextProbeMilliseconds
        }.min()
    }

    /// The earliest time an origin that is up and holds parked slots may start one, if only its
    /// pace holds it back (one at its limit waits for a delivery to end, not for a time).
    var earliestHeldStart: UInt64? {
        holding.lazy.compactMap { o -> UInt64? in
            let entry = self.entries[Int(o)]
            guard entry.outage == nil, entry.parkedCount > 0 else { return nil }
            return self.concurrency.nextStart(entry.flow, sending: entry.sending)
        }.min()
    }

    /// Takes a token of origin `o`'s retry budget at `now`, if there is one.
    mutating func takeToken(_ o: UInt32, nowMilliseconds now: UInt64) -> Bool {
        budget.take(&entries[Int(o)].tokens, nowMilliseconds: now)
    }

    /// When origin `o`'s retry budget next holds a token (now if it does).
    func nextToken(_ o: UInt32, nowMilliseconds now: UInt64) -> UInt64 {
        budget.nextTokenMilliseconds(entries[Int(o)].tokens, nowMilliseconds: now)
    }

    /// Pulls every pending probe time after `limit` back to `limit`.
    mutating func probeNoLaterThan(_ limit: UInt64) {
        for o in down where entries[Int(o)].outage!.nextProbeMilliseconds > limit {
            entries[Int(o)].outage!.nextProbeMilliseconds = limit
        }
    }
}

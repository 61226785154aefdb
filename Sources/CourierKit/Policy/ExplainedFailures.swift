import Foundation

extension RetryPolicy {
    /// How many failures in a row of one message its destination's own failure rate explains:
    /// those do not grow the message's backoff. A message needs 1/(1−f) requests on average at a
    /// failure rate f whatever its backoff; backoff only decides who waits. A run of n failures
    /// that the destination's rate makes likely (1 in 1,000 or likelier, by default) is luck, not
    /// a sign about this message: its delay after the n-th failure uses the exponent of the
    /// (n − e)-th, where e is the longest such run (`explainedRun(failureRate:)`), and never less
    /// than the first's.
    ///
    /// | the destination's other answers | e | delay after the n-th failure (default policy) |
    /// |---|---|---|
    /// | fewer than `minimumAnswers`, or all 2xx | 0 | 1 s × 2ⁿ⁻¹, up to 300 s, as without it |
    /// | 10% failing | 3 | up to 1 s through the 4th failure, then 2 s, 4 s, … |
    /// | 50% failing (the first user's server) | 9 | up to 1 s through the 10th failure, then 2 s, … |
    /// | 90% failing | 65 | up to 1 s through the 66th failure (the retry budget bounds the load) |
    /// | 100% failing (down) | 0 | 1 s × 2ⁿ⁻¹, up to 300 s, as without it |
    ///
    /// So a message that fails while the rest succeed (a *poison* message) backs off exactly as
    /// without it, and an unlucky one on a server failing at random waits about a second, not
    /// minutes. The rate is measured per destination on its latest answers to *other* messages
    /// (`window`, no older than `windowDuration`): a 2xx is a success; a 5xx, 408, timeout or
    /// connection failure a failure; a 4xx (the message's own problem) or a 429/503 the
    /// destination's pace absorbs counts as neither. In memory only: after a restart each
    /// destination's rate is learned again.
    public struct ExplainedFailures: Sendable, Hashable {
        /// Whether a destination's failure rate explains any failures. The default is true.
        public var isEnabled: Bool
        /// How likely by chance a run of failures must be to be explained. The default is 0.001
        /// (1 in 1,000): 9 failures in a row at a 50% failure rate. A larger value explains
        /// fewer (0.01: 6), a smaller one more, and lets a poison message retry faster at first.
        public var chance: Double
        /// How many of a destination's latest answers tell its failure rate. The default is 128.
        public var window: Int
        /// How old those answers may be. The default is 10 minutes.
        public var windowDuration: Duration
        /// How many answers to other messages the window must hold to tell a rate; with fewer,
        /// nothing is explained. The default is 16.
        public var minimumAnswers: Int

        /// The settings given (each defaults to the documented default of its property).
        public init(
            isEnabled: Bool = true, chance: Double = 0.001, window: Int = 128, windowDuration: Duration = .seconds(600),
            minimumAnswers: Int = 16
        ) {
            self.isEnabled = isEnabled
            self.chance = chance
            self.window = window
            self.windowDuration = windowDuration
            self.minimumAnswers = minimumAnswers
        }

        /// Explains nothing: a message's backoff grows with each of its failures.
        public static let disabled = ExplainedFailures(isEnabled: false)

        /// The longest run of failures at least `chance` likely at `failureRate`:
        /// ⌊ln chance / ln f⌋, with f clamped to 0.99. 0 when f is 0, and when f is 1: a
        /// destination that answered none of the others with a 2xx is down, not unlucky, and
        /// its messages back off in full.
        public func explainedRun(failureRate: Double) -> Int {
            guard isEnabled, failureRate > 0, failureRate < 1, chance > 0, chance < 1 else { return 0 }
            let f = min(failureRate, 0.99)
            // The epsilon keeps an exact quotient (3 at f = 0.1) from rounding down to one less.
            let run = (Foundation.log(chance) / Foundation.log(f) + 1e-9).rounded(.down)
            return run.isFinite ? max(0, Int(run)) : 0
        }

        /// What `problems` says of these settings (nothing when they are valid).
        var problems: [String] {
            var found: [String] = []
            if !(chance > 0 && chance < 1) { found.append("retry.explainedFailures.chance must be in (0, 1)") }
            if window < 1 || window > 4096 { found.append("retry.explainedFailures.window must be 1...4096") }
            if windowDuration <= .zero { found.append("retry.explainedFailures.windowDuration must be positive") }
            if minimumAnswers < 1 { found.append("retry.explainedFailures.minimumAnswers must be at least 1") }
            return found
        }
    }
}

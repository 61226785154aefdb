import FlyingFox
import Foundation

/// A loopback HTTP server that fails on purpose, like the servers Courier is built for: it
/// answers POSTs with 500 at a given rate (the first user's server: half the time), and can
/// also drop connections without answering, delay, and answer 429 with `Retry-After`. It
/// counts requests and `Idempotency-Key`s, so tests can check that every message arrived and
/// how many duplicates at-least-once delivery produced. Binds 127.0.0.1 unless told another
/// address (`0.0.0.0`: every interface, so a phone on the same Wi-Fi reaches it), and can log
/// each arrival, one line each, to a sink its caller gives (`flaky-server` prints them).
public final class FlakyServer: Sendable {
    public struct Behavior: Sendable {
        /// Chance of answering 500. The default is 0.5.
        public var failureRate = 0.5
        /// Chance of closing the connection without any answer. The default is 0.
        public var dropRate = 0.0
        /// Chance of answering 429 with `Retry-After: retryAfterSeconds`. The default is 0.
        public var rateLimitRate = 0.0
        public var retryAfterSeconds = 1
        /// Chance of answering 503 with a `Retry-After` of `retryAfterSeconds`. The default is 0.
        public var unavailableRate = 0.0
        /// Whether `Retry-After` (on 429 and 503) is an HTTP date instead of seconds. The
        /// default is false. A date has whole-second resolution: it names a moment between
        /// `retryAfterSeconds - 1` and `retryAfterSeconds` from now.
        public var retryAfterAsHTTPDate = false
        /// Chance of holding an answer (a 200) for `slowDelay`, meant to be longer than the
        /// client's request timeout. The default is 0.
        public var slowRate = 0.0
        /// The default is 5 seconds.
        public var slowDelay: Duration = .seconds(5)
        /// Wait this long before answering. The default is none.
        public var delay: Duration = .zero
        /// Wait a time drawn uniformly from this range before answering (on top of `delay`):
        /// a mobile network's latency. The default is none.
        public var latency: ClosedRange<Duration>?
        /// A rate limiter in front of the server (nginx's `limit_req`): requests it refuses are
        /// answered at once, and none of the rates above applies to them. The default is none.
        public var limiter: TokenBucket?
        /// Seed for the coin flips; the default (nil) is random.
        public var seed: UInt64?

        public init(
            failureRate: Double = 0.5, dropRate: Double = 0, rateLimitRate: Double = 0,
            retryAfterSeconds: Int = 1, delay: Duration = .zero, seed: UInt64? = nil
        ) {
            self.failureRate = failureRate
            self.dropRate = dropRate
            self.rateLimitRate = rateLimitRate
            self.retryAfterSeconds = retryAfterSeconds
            self.delay = delay
            self.seed = seed
        }
    }

    /// A token bucket: `ratePerSecond` tokens a second, at most `burst` saved up; a request
    /// takes one, or is refused with `status` (503 or 429) and `retryAfter` if set.
    public struct TokenBucket: Sendable {
        public var ratePerSecond: Double
        public var burst: Int
        public var status: Int
        public var retryAfter: String?

        public init(ratePerSecond: Double, burst: Int, status: Int = 503, retryAfter: String? = nil) {
            precondition(ratePerSecond > 0 && burst >= 1, "a bucket that never serves")
            self.ratePerSecond = ratePerSecond
            self.burst = burst
            self.status = status
            self.retryAfter = retryAfter
        }

        /// How long `count` requests take at best: the burst at once, then the rate.
        public func idealDuration(of count: Int) -> Duration {
            .seconds(Double(max(0, count - burst)) / ratePerSecond)
        }

        /// The bucket's fill at a moment, as a pure value: the server drives it on its clock,
        /// tests on virtual time.
        public struct Level: Sendable {
            public private(set) var tokens: Double
            private var refilled: Duration

            /// A full bucket at `time`.
            public init(full bucket: TokenBucket, at time: Duration = .zero) {
                tokens = Double(bucket.burst)
                refilled = time
            }

            /// Refills up to `time`, then takes a token if there is one: false is a refusal.
            public mutating func take(_ bucket: TokenBucket, at time: Duration) -> Bool {
                let elapsed = time - refilled
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                tokens = min(Double(bucket.burst), tokens + max(0, seconds) * bucket.ratePerSecond)
                refilled = max(refilled, time)
                guard tokens >= 1 else { return false }
                tokens -= 1
                return true
            }
        }
    }

    /// One request as the server saw it: when it arrived (after its body was read) and what
    /// it got. Kept per `Idempotency-Key`, so tests can check each message's retry spacing
    /// against the client's policy.
    public struct Attempt: Sendable, Equatable {
        public enum Answer: Sendable, Equatable {
            case status(Int, retryAfter: String?)
            /// Closed without a byte.
            case dropped
            /// Held for `slowDelay`, then answered 200 (if the client still listened).
            case slow
        }
        public var arrived: ContinuousClock.Instant
        public var answer: Answer
    }

    /// What the server saw.
    public struct Statistics: Sendable, Equatable {
        public var requests = 0
        public var answered: [Int: Int] = [:]
        public var dropped = 0
        /// Requests the limiter refused (also counted in `answered` under its status).
        public var refused = 0
        /// Distinct `Idempotency-Key`s seen.
        public var distinctKeys = 0
        /// Distinct keys answered 2xx at least once: messages the server accepted.
        public var acceptedKeys = 0
        /// 2xx answers for a key already accepted: duplicates a real server would drop.
        public var duplicateAccepts = 0
    }

    let state: ServerState
    private let host: String
    private let server: HTTPServer
    private let task: Task<Void, any Error>

    /// Starts listening on `host`, an IPv4 address (port 0: any free port). Every arrival is
    /// handed to `log` as one line (see `ServerState.logArrival`); nil, the default, logs
    /// nothing, as tests, benchmarks and the terminal sample (whose screen it would spoil) want.
    public init(
        behavior: Behavior = Behavior(), host: String = "127.0.0.1", port: UInt16 = 0,
        log: (@Sendable (String) -> Void)? = nil
    ) async throws {
        state = ServerState(behavior: behavior, log: log)
        self.host = host
        let server = HTTPServer(address: try .inet(ip4: host, port: port), timeout: 60, logger: .disabled)
        self.server = server
        let state = self.state
        // A redirect, to check that clients never follow one with a POST on their own.
        let redirect = HTTPResponse(statusCode: .temporaryRedirect, headers: HTTPHeaders([.location: "/messages"]))
        await server.appendRoute("POST /redirect") { request in try await state.answer(request, with: redirect) }
        await server.appendRoute("POST *") { request in try await state.handle(request) }
        await server.appendRoute("GET /stats") { request in
            try await state.answer(request, with: state.statisticsResponse())
        }
        // The 404 FlyingFox gives a request no route takes, given here so that it is logged too:
        // a phone's browser opening the URL (a GET) shows in the log that the phone got through.
        await server.appendRoute("*") { request in
            try await state.answer(request, with: HTTPResponse(statusCode: .notFound))
        }
        task = Task { try await server.run() }
        try await server.waitUntilListening(timeout: 10)
    }

    /// The port it listens on (the one the kernel chose, for port 0).
    public var port: UInt16 {
        get async {
            if case .ip4(_, let port) = await server.listeningAddress { return port }
            return 0
        }
    }

    /// `http://HOST:PORT/messages`, a URL this machine reaches it at: on 0.0.0.0, 127.0.0.1's
    /// (a phone needs one of `localNetworkURLs`).
    public var url: URL {
        get async {
            let host = self.host == "0.0.0.0" ? "127.0.0.1" : self.host
            let port = await self.port
            return URL(string: "http://\(host):\(port)/messages")!
        }
    }

    /// On 0.0.0.0: `http://ADDRESS:PORT/messages` at each of this machine's non-loopback IPv4
    /// addresses, with its interface's name, for a phone on the same network. Otherwise none.
    public var localNetworkURLs: [(interface: String, url: URL)] {
        get async {
            guard host == "0.0.0.0" else { return [] }
            let port = await self.port
            return Self.localIPv4Addresses().map {
                (interface: $0.interface, url: URL(string: "http://\($0.address):\(port)/messages")!)
            }
        }
    }

    public var statistics: Statistics { state.statistics }
    /// The `Idempotency-Key`s answered 2xx at least once.
    public var acceptedKeySet: Set<String> { state.acceptedKeys }
    /// Each accepted key's body (as first accepted).
    public var acceptedBodies: [String: Data] { state.acceptedBodies }
    /// Every request carrying an `Idempotency-Key`, by key, in arrival order.
    public var attemptsByKey: [String: [Attempt]] { state.attemptsByKey }

    /// Replaces the behaviour (e.g. "the server recovers").
    public func setBehavior(_ behavior: Behavior) { state.setBehavior(behavior) }

    public func stop() async {
        await server.stop(timeout: 1)
        task.cancel()
    }
}

/// Closes the connection before writing a single byte: FlyingFox writes a WebSocket upgrade's
/// response only after `makeFrames` returns, so throwing here is a clean "drop".
struct DropConnection: WSHandler {
    struct Dropped: Error {}
    func makeFrames(for client: AsyncThrowingStream<WSFrame, any Error>) async throws -> AsyncStream<WSFrame> {
        throw Dropped()
    }
}

import CourierLog
import FlyingFox
import Foundation

/// The server's counters and coin, under a lock (handlers run concurrently).
final class ServerState: @unchecked Sendable {
    private let lock = NSLock()
    private var behavior: FlakyServer.Behavior
    private var random: SplitMix64
    private var stats = FlakyServer.Statistics()
    private var keys: [String: Bool] = [:]  // key → accepted
    private var attempts: [String: [FlakyServer.Attempt]] = [:]
    /// The limiter's fill (nil until its first request: full then), on a clock from `started`.
    private var level: FlakyServer.TokenBucket.Level?
    private let started = ContinuousClock.now
    /// Where each arrival's line goes; nil: nowhere. Called outside `lock` (it may write to a
    /// terminal), from the handlers' tasks at once: each call is one whole line.
    private let log: (@Sendable (String) -> Void)?

    init(behavior: FlakyServer.Behavior, log: (@Sendable (String) -> Void)? = nil) {
        self.behavior = behavior
        self.log = log
        random = SplitMix64(seed: behavior.seed ?? UInt64.random(in: .min ... .max))
    }

    var statistics: FlakyServer.Statistics { lock.withLock { stats } }
    var acceptedKeys: Set<String> { lock.withLock { Set(keys.filter(\.value).keys) } }
    /// The body of each key's first accepted request.
    private var bodies: [String: Data] = [:]
    var acceptedBodies: [String: Data] { lock.withLock { bodies } }
    var attemptsByKey: [String: [FlakyServer.Attempt]] { lock.withLock { attempts } }

    func setBehavior(_ b: FlakyServer.Behavior) { lock.withLock { behavior = b } }

    enum Verdict {
        case drop, fail, rateLimit(status: HTTPStatusCode, retryAfter: String), slow(Duration), accept
        /// Refused by the limiter, with or without `Retry-After`.
        case limited(status: HTTPStatusCode, retryAfter: String?)
    }

    func handle(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try await request.bodyData  // read the whole request first, as a real server does
        let arrived = log == nil ? nil : Date()  // nothing more on the benchmarks' path than this
        let key = request.headers[HTTPHeader("Idempotency-Key")]
        let (verdict, delay) = decide(key: key, body: body)
        // Logged before any wait, so that a held answer shows while it is held.
        if let arrived {
            logArrival(request, at: arrived, bytes: body.count, answer: Self.describe(verdict, after: delay))
        }
        if delay > .zero { try await Task.sleep(for: delay) }
        switch verdict {
        case .drop: return HTTPResponse(webSocket: DropConnection())
        case .fail: return HTTPResponse(statusCode: .internalServerError)
        case .rateLimit(let status, let retryAfter):
            return HTTPResponse(statusCode: status, headers: HTTPHeaders([HTTPHeader("Retry-After"): retryAfter]))
        case .limited(let status, let retryAfter):
            return HTTPResponse(
                statusCode: status, headers: HTTPHeaders(retryAfter.map { [HTTPHeader("Retry-After"): $0] } ?? [:]))
        case .slow(let hold):
            try await Task.sleep(for: hold)
            return HTTPResponse(statusCode: .ok)
        case .accept:
            // No body: FlyingFox writes a body separately from the header, and two small writes
            // on one connection stall 40 ms each (Nagle + delayed ACK). One write does not.
            return HTTPResponse(statusCode: .ok)
        }
    }

    private func decide(key: String?, body: Data) -> (Verdict, Duration) {
        lock.withLock {
            stats.requests += 1
            if let key, keys[key] == nil {
                keys[key] = false
                stats.distinctKeys += 1
            }
            let verdict = takeToken() ?? roll(behavior)
            switch verdict {
            case .limited(let status, _):
                stats.refused += 1
                stats.answered[Int(status.code), default: 0] += 1
            case .drop: stats.dropped += 1
            case .fail: stats.answered[500, default: 0] += 1
            case .rateLimit(let status, _): stats.answered[Int(status.code), default: 0] += 1
            case .slow, .accept:
                stats.answered[200, default: 0] += 1
                if let key {
                    if keys[key] == true { stats.duplicateAccepts += 1 } else { stats.acceptedKeys += 1 }
                    keys[key] = true
                    if bodies[key] == nil { bodies[key] = body }
                }
            }
            if let key {
                let answer: FlakyServer.Attempt.Answer =
                    switch verdict {
                    case .drop: .dropped
                    case .fail: .status(500, retryAfter: nil)
                    case .rateLimit(let status, let retryAfter): .status(Int(status.code), retryAfter: retryAfter)
                    case .limited(let status, let retryAfter): .status(Int(status.code), retryAfter: retryAfter)
                    case .slow: .slow
                    case .accept: .status(200, retryAfter: nil)
                    }
                attempts[key, default: []].append(FlakyServer.Attempt(arrived: .now, answer: answer))
            }
            if case .limited = verdict { return (verdict, .zero) }  // a limiter answers at once
            return (verdict, behavior.delay + latency(behavior))
        }
    }

    /// The limiter's verdict: nil if the request may go on (it took a token). Under `lock`.
    private func takeToken() -> Verdict? {
        guard let bucket = behavior.limiter else { return nil }
        let now = started.duration(to: .now)
        var level = self.level ?? FlakyServer.TokenBucket.Level(full: bucket, at: now)
        defer { self.level = level }
        guard level.take(bucket, at: now) else {
            return .limited(
                status: HTTPStatusCode(
                    bucket.status, phrase: bucket.status == 429 ? "Too Many Requests" : "Service Unavailable"),
                retryAfter: bucket.retryAfter)
        }
        return nil
    }

    /// A draw from `latency`, or zero. Under `lock`.
    private func latency(_ b: FlakyServer.Behavior) -> Duration {
        guard let range = b.latency else { return .zero }
        return range.lowerBound + (range.upperBound - range.lowerBound) * nextUnit()
    }

    /// One coin flip over the behaviour's rates, in this order: drop, 429, 503, slow, 500
    /// (a share of what is left), accept. Under `lock`.
    private func roll(_ b: FlakyServer.Behavior) -> Verdict {
        var roll = nextUnit()
        if roll < b.dropRate { return .drop }
        roll -= b.dropRate
        if roll < b.rateLimitRate { return .rateLimit(status: .tooManyRequests, retryAfter: retryAfter(b)) }
        roll -= b.rateLimitRate
        if roll < b.unavailableRate { return .rateLimit(status: .serviceUnavailable, retryAfter: retryAfter(b)) }
        roll -= b.unavailableRate
        if roll < b.slowRate { return .slow(b.slowDelay) }
        roll -= b.slowRate
        let rest = 1 - b.dropRate - b.rateLimitRate - b.unavailableRate - b.slowRate
        return roll < b.failureRate * rest ? .fail : .accept
    }

    private func retryAfter(_ b: FlakyServer.Behavior) -> String {
        guard b.retryAfterAsHTTPDate else { return String(b.retryAfterSeconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date().addingTimeInterval(Double(b.retryAfterSeconds)))
    }

    /// Uniform in [0, 1). Under `lock`.
    private func nextUnit() -> Double { random.nextUnit() }

    /// A request no coin is flipped for (the redirect, `/stats`, a route there is not): read,
    /// logged, and answered `response`. Not counted in `statistics`, as before.
    func answer(_ request: HTTPRequest, with response: HTTPResponse) async throws -> HTTPResponse {
        let body = try await request.bodyData
        logArrival(request, at: Date(), bytes: body.count, answer: String(response.statusCode.code))
        return response
    }

    /// One line for an arrival, if anyone listens, e.g.
    /// `2025-11-21T16:00:00.123Z POST /messages key=8F2C… bytes=17 answer=500 delay=250ms`:
    /// when it arrived (its body read; UTC, milliseconds), the method and path, the
    /// `Idempotency-Key` (`-`: none), the body's size in bytes, and the answer (see `describe`).
    private func logArrival(_ request: HTTPRequest, at arrived: Date, bytes: Int, answer: String) {
        guard let log else { return }
        let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(arrived)
        let key = request.headers[HTTPHeader("Idempotency-Key")] ?? "-"
        log("\(time) \(request.method.rawValue) \(request.path) key=\(key) bytes=\(bytes) answer=\(answer)")
    }

    /// A verdict as the log shows it: the status sent (`200`, `500`, `429`, `503`), `dropped`
    /// (closed without a byte) or `delayed` (held for `slowDelay`, past a client's timeout, then
    /// 200), followed by ` delay=Nms` when the server waits before that (`delay`, `latency`, and
    /// the hold of `delayed`).
    static func describe(_ verdict: Verdict, after delay: Duration) -> String {
        var wait = delay
        let answer: String
        switch verdict {
        case .accept: answer = "200"
        case .fail: answer = "500"
        case .rateLimit(let status, _), .limited(let status, _): answer = String(status.code)
        case .drop: answer = "dropped"
        case .slow(let hold):
            answer = "delayed"
            wait += hold
        }
        guard wait > .zero else { return answer }
        return "\(answer) delay=\(Int((wait / .milliseconds(1)).rounded()))ms"
    }

    func statisticsResponse() -> HTTPResponse {
        let s = statistics
        let answered = s.answered.keys.sorted().map { "\"\($0)\":\(s.answered[$0]!)" }.joined(separator: ",")
        let json =
            #"{"requests":\#(s.requests),"refused":\#(s.refused),"dropped":\#(s.dropped),"answered":{\#(answered)},"#
            + #""distinct_keys":\#(s.distinctKeys),"accepted_keys":\#(s.acceptedKeys),"#
            + #""duplicate_accepts":\#(s.duplicateAccepts)}"#
        return HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json"], body: Data(json.utf8))
    }
}

import FlyingFox
import Foundation

/// The server's counters and coin, under a lock (handlers run concurrently).
final class ServerState: @unchecked Sendable {
    private let lock = NSLock()
    private var behavior: FlakyServer.Behavior
    private var random: UInt64
    private var stats = FlakyServer.Statistics()
    private var keys: [String: Bool] = [:]  // key → accepted

    init(behavior: FlakyServer.Behavior) {
        self.behavior = behavior
        random = behavior.seed ?? UInt64.random(in: .min ... .max)
    }

    var statistics: FlakyServer.Statistics { lock.withLock { stats } }
    var acceptedKeys: Set<String> { lock.withLock { Set(keys.filter(\.value).keys) } }

    func setBehavior(_ b: FlakyServer.Behavior) { lock.withLock { behavior = b } }

    enum Verdict { case drop, fail, rateLimit(Int), accept }

    func handle(_ request: HTTPRequest) async throws -> HTTPResponse {
        _ = try await request.bodyData  // read the whole request first, as a real server does
        let key = request.headers[HTTPHeader("Idempotency-Key")]
        let (verdict, delay) = decide(key: key)
        if delay > .zero { try await Task.sleep(for: delay) }
        switch verdict {
        case .drop: return HTTPResponse(webSocket: DropConnection())
        case .fail: return HTTPResponse(statusCode: .internalServerError)
        case .rateLimit(let seconds):
            return HTTPResponse(statusCode: .tooManyRequests, headers: HTTPHeaders([HTTPHeader("Retry-After"): String(seconds)]))
        case .accept:
            // No body: FlyingFox writes a body separately from the header, and two small writes
            // on one connection stall 40 ms each (Nagle + delayed ACK). One write does not.
            return HTTPResponse(statusCode: .ok)
        }
    }

    private func decide(key: String?) -> (Verdict, Duration) {
        lock.withLock {
            stats.requests += 1
            if let key, keys[key] == nil {
                keys[key] = false
                stats.distinctKeys += 1
            }
            let b = behavior
            let roll = nextUnit()
            let verdict: Verdict
            if roll < b.dropRate {
                verdict = .drop
                stats.dropped += 1
            } else if roll < b.dropRate + b.rateLimitRate {
                verdict = .rateLimit(b.retryAfterSeconds)
                stats.answered[429, default: 0] += 1
            } else if roll < b.dropRate + b.rateLimitRate + b.failureRate * (1 - b.dropRate - b.rateLimitRate) {
                verdict = .fail
                stats.answered[500, default: 0] += 1
            } else {
                verdict = .accept
                stats.answered[200, default: 0] += 1
                if let key {
                    if keys[key] == true { stats.duplicateAccepts += 1 } else { stats.acceptedKeys += 1 }
                    keys[key] = true
                }
            }
            return (verdict, b.delay)
        }
    }

    /// Uniform in [0, 1) (SplitMix64). Under `lock`.
    private func nextUnit() -> Double {
        random &+= 0x9E37_79B9_7F4A_7C15
        var z = random
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
    }

    func statisticsResponse() -> HTTPResponse {
        let s = statistics
        let answered = s.answered.keys.sorted().map { "\"\($0)\":\(s.answered[$0]!)" }.joined(separator: ",")
        let json = #"{"requests":\#(s.requests),"dropped":\#(s.dropped),"answered":{\#(answered)},"distinct_keys":\#(s.distinctKeys),"accepted_keys":\#(s.acceptedKeys),"duplicate_accepts":\#(s.duplicateAccepts)}"#
        return HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json"], body: Data(json.utf8))
    }
}

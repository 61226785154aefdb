import CourierKit
import Foundation

// The picture of the DocC article "Retry and backoff" (issue 24): what Courier had in flight,
// and what the server accepted and refused, over time, against the 20/s rate limiter. Built
// from the courier's public event stream; written by `make bench-drain` as an SVG.

/// Attempts started and ended, and refusals, each with its time since the drain began.
final class DrainTrace: @unchecked Sendable {
    enum Mark { case started, delivered, refused, failed }
    private let lock = NSLock()
    private var marks: [(seconds: Double, mark: Mark)] = []
    private var sentAt: [MessageID: Double] = [:]
    private var latencies: [Double] = []
    private let start = ContinuousClock.now

    /// Message `id` was sent now.
    func sent(_ id: MessageID) {
        let t = seconds(start.duration(to: .now))
        lock.withLock { sentAt[id] = t }
    }

    /// Send-to-delivered seconds of each message delivered, ascending.
    var sortedLatencies: [Double] { lock.withLock { latencies }.sorted() }

    func record(_ event: CourierEvent) {
        if case .delivered(let id, _) = event {
            let t = seconds(start.duration(to: .now))
            lock.withLock { if let sent = sentAt.removeValue(forKey: id) { latencies.append(t - sent) } }
        }
        let mark: Mark
        switch event {
        case .attemptStarted: mark = .started
        case .delivered: mark = .delivered
        case .failed(_, _, .response(let status, _), _) where status == 429 || status == 503: mark = .refused
        case .failed: mark = .failed
        default: return
        }
        let t = seconds(start.duration(to: .now))
        lock.withLock { marks.append((t, mark)) }
    }

    /// Per bucket of `width` seconds: the most in flight, the accepted and the refused.
    func buckets(width: Double) -> [(inFlight: Int, accepted: Int, refused: Int)] {
        let sorted = lock.withLock { marks }.sorted { $0.seconds < $1.seconds }
        guard let last = sorted.last else { return [] }
        var result = Array(repeating: (inFlight: 0, accepted: 0, refused: 0), count: Int(last.seconds / width) + 1)
        var inFlight = 0
        for (t, mark) in sorted {
            let b = Int(t / width)
            switch mark {
            case .started: inFlight += 1
            case .delivered: inFlight -= 1; result[b].accepted += 1
            case .refused: inFlight -= 1; result[b].refused += 1
            case .failed: inFlight -= 1
            }
            result[b].inFlight = max(result[b].inFlight, inFlight)
        }
        return result
    }
}

/// An SVG: accepted and refused requests per 0.5 s as bars, the most in flight as a line.
/// `limitPerSecond`, if given, is drawn as a dashed line: the server's rate.
func drainPlotSVG(_ trace: DrainTrace, title: String, limitPerSecond: Double? = nil) -> String {
    let width = 0.5
    let buckets = trace.buckets(width: width)
    let w = 720.0, h = 300.0, left = 50.0, right = 80.0, top = 30.0, bottom = 40.0
    let plotW = w - left - right, plotH = h - top - bottom
    let maxCount = Double(max(1, buckets.map { $0.accepted + $0.refused }.max() ?? 1))
        .rounded(.up)
    let maxInFlight = Double(max(1, buckets.map(\.inFlight).max() ?? 1))
    let barW = plotW / Double(max(1, buckets.count))
    var svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" \
        font-size="11">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(Int(left))" y="18" font-size="13">\(title)</text>

        """
    for (i, b) in buckets.enumerated() {
        let x = left + Double(i) * barW
        let acceptedH = Double(b.accepted) / maxCount * plotH
        let refusedH = Double(b.refused) / maxCount * plotH
        svg += String(
            format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#7fb3d5\"/>\n",
            x, top + plotH - acceptedH, barW * 0.9, acceptedH)
        svg += String(
            format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e74c3c\"/>\n",
            x, top + plotH - acceptedH - refusedH, barW * 0.9, refusedH)
    }
    let points = buckets.enumerated().map { i, b in
        String(
            format: "%.1f,%.1f", left + (Double(i) + 0.5) * barW, top + plotH - Double(b.inFlight) / maxInFlight * plotH
        )
    }.joined(separator: " ")
    svg += "<polyline points=\"\(points)\" fill=\"none\" stroke=\"#1d3557\" stroke-width=\"2\"/>\n"
    if let limit = limitPerSecond {
        let y = top + plotH - limit * width / maxCount * plotH
        svg += String(
            format:
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"5,4\"/>\n",
            left, y, left + plotW, y)
        svg += String(
            format: "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">limiter: %.0f/s</text>\n", left + plotW + 4, y + 4, limit
        )
    }
    let seconds = Double(buckets.count) * width
    svg += """
        <line x1="\(Int(left))" y1="\(Int(top + plotH))" x2="\(Int(left + plotW))" y2="\(Int(top + plotH))" \
        stroke="black"/>
        <text x="\(Int(left))" y="\(Int(h - 20))">0 s</text>
        <text x="\(Int(left + plotW) - 30)" y="\(Int(h - 20))">\(String(format: "%.0f", seconds)) s</text>
        <text x="4" y="\(Int(top + 10))" fill="#2874a6">\(Int(maxCount))/\(width) s</text>
        <text x="\(Int(w) - 4)" y="\(Int(top + 10))" fill="#1d3557" text-anchor="end">\(Int(maxInFlight)) in \
        flight</text>
        <text x="\(Int(left))" y="\(Int(h - 6))"><tspan fill="#2874a6">■ accepted</tspan> \
        <tspan fill="#e74c3c">■ refused (503)</tspan> \
        <tspan fill="#1d3557">— most in flight</tspan>, per 0.5 s</text>
        </svg>

        """
    return svg
}

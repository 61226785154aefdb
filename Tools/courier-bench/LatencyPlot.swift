import Foundation

/// An SVG of each curve's send-to-delivered times as a cumulative distribution: the share of
/// messages delivered within t, for t on a log scale from 10 ms to the slowest message (issue
/// 36: the tail is what the rules change, so the x axis must show minutes beside milliseconds).
/// `curves` are (label, ascending seconds).
func latencyPlotSVG(_ curves: [(String, [Double])], title: String) -> String {
    let w = 720.0, h = 320.0, left = 50.0, right = 20.0, top = 30.0, bottom = 56.0
    let plotW = w - left - right, plotH = h - top - bottom
    let lowest = 0.01
    let slowest = max(1, curves.compactMap { $0.1.last }.max() ?? 1)
    let decades = max(1, (log10(slowest / lowest)).rounded(.up))
    func x(_ seconds: Double) -> Double { left + log10(max(seconds, lowest) / lowest) / decades * plotW }
    func y(_ share: Double) -> Double { top + plotH - share * plotH }
    var svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(w))" height="\(Int(h))" font-family="sans-serif" \
        font-size="11">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(Int(left))" y="18" font-size="13">\(title)</text>

        """
    // Grid: a line per decade, and at 50%, 90% and 99% of messages.
    for d in 0...Int(decades) {
        let seconds = lowest * pow(10, Double(d))
        let label = seconds < 1 ? String(format: "%.0f ms", seconds * 1000) : String(format: "%.0f s", seconds)
        svg += String(
            format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
            x(seconds), top, x(seconds), top + plotH)
        svg += String(
            format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%@</text>\n",
            x(seconds), top + plotH + 14, label)
    }
    for share in [0.5, 0.9, 0.99] {
        svg += String(
            format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
            left, y(share), left + plotW, y(share))
        svg += String(
            format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n",
            left - 4, y(share) + 4, share * 100)
    }
    let colors = ["#1d3557", "#e74c3c", "#2a9d8f"]
    var legend: [String] = []
    for (index, (label, seconds)) in curves.enumerated() {
        let color = colors[index % colors.count]
        // A step per message: the share delivered within each one's time.
        let points = seconds.enumerated().map { i, t in
            String(format: "%.1f,%.1f", x(t), y(Double(i + 1) / Double(seconds.count)))
        }.joined(separator: " ")
        svg += "<polyline points=\"\(points)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"/>\n"
        let max = seconds.last.map { String(format: "%.1f s", $0) } ?? "—"
        legend.append("<tspan fill=\"\(color)\">— \(label) (slowest \(max))</tspan>")
    }
    svg += """
        <line x1="\(Int(left))" y1="\(Int(top + plotH))" x2="\(Int(left + plotW))" y2="\(Int(top + plotH))" \
        stroke="black"/>
        <text x="\(Int(left))" y="\(Int(h - 22))">share of messages delivered within t (log scale), loopback, \
        `make bench-drain`</text>
        <text x="\(Int(left))" y="\(Int(h - 6))">\(legend.joined(separator: "   "))</text>
        </svg>

        """
    return svg
}

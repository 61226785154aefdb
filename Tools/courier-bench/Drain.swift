import CourierKit
import FlakyServer
import Foundation
import RetryScenarios

// `courier-bench --drain` (make bench-drain, issue 24): how fast a backlog reaches a server
// that would take it, through the public API with default settings, on loopback, real time,
// side by side in one run. One line per scenario: seconds until the last message was
// delivered (or the cap, with how many were), requests sent, requests refused (429/503 from the
// limiter or the outage), and the ideal time for that scenario.

struct DrainScenario {
    var name: String
    var count: Int
    var behavior: FlakyServer.Behavior
    /// The best any client could do, and why.
    var ideal: Duration?
    var idealReason: String
    /// For the outage: how long the server answers 503 before it recovers.
    var outage: Duration?
    /// Where to write the picture of this drain (`DrainPlot.swift`), if anywhere.
    var plotTitle: String?
    /// After the first `count`, one message every `interval`, for `duration` (steady traffic).
    var steady: (interval: Duration, duration: Duration)?
    /// Also run with the retry-tail rules `.disabled`, side by side (issue 36).
    var comparesRules = false
    /// Draw both runs' send-to-delivered times (`LatencyPlot.swift`).
    var plotsLatency = false

    /// Past this, the scenario stops and reports what was delivered: 5 times the ideal, at
    /// least 150 s; 900 s where the retry policy sets the pace (its 300 s cap, with jitter).
    var cap: Duration { ideal.map { max(.seconds(150), $0 * 5) } ?? .seconds(900) }
}

func drainScenarios() -> [DrainScenario] {
    var latency = FlakyServer.Behavior(failureRate: 0, seed: 24)
    latency.latency = .zero ... .milliseconds(400)
    var limited503 = FlakyServer.Behavior(failureRate: 0, seed: 24)
    limited503.limiter = .init(ratePerSecond: 20, burst: 10, status: 503)
    var limited429 = FlakyServer.Behavior(failureRate: 0, seed: 24)
    limited429.limiter = .init(ratePerSecond: 20, burst: 10, status: 429, retryAfter: "1")
    var down = FlakyServer.Behavior(failureRate: 0, seed: 24)
    down.unavailableRate = 1
    return [
        DrainScenario(
            name: "1,000 messages, 0–400 ms latency", count: 1000, behavior: latency,
            ideal: .seconds(1000 * 0.2 / 64), idealReason: "mean latency × count / 64 in flight"),
        DrainScenario(
            name: "500 messages, limiter 20/s burst 10, 503 no Retry-After", count: 500, behavior: limited503,
            ideal: limited503.limiter!.idealDuration(of: 500), idealReason: "the limiter's pace",
            plotTitle: "500 messages against a 20/s limiter (burst 10, 503): default settings"),
        DrainScenario(
            name: "500 messages, limiter 20/s burst 10, 429 Retry-After: 1", count: 500, behavior: limited429,
            ideal: limited429.limiter!.idealDuration(of: 500), idealReason: "the limiter's pace"),
        DrainScenario(
            name: "1,000 messages, 50% 500s (the challenge's server)", count: 1000,
            behavior: .init(failureRate: 0.5, seed: 24), ideal: nil,
            idealReason: "set by the retry policy: today's figure is the bar", comparesRules: true,
            plotsLatency: true),
        DrainScenario(
            name: "300 messages, 50% 500s", count: 300, behavior: .init(failureRate: 0.5, seed: 24), ideal: nil,
            idealReason: "set by the retry policy", comparesRules: true),
        DrainScenario(
            name: "2 a second for 90 s, 50% 500s", count: 0, behavior: .init(failureRate: 0.5, seed: 24), ideal: nil,
            idealReason: "the traffic's own 90 s", steady: (.milliseconds(500), .seconds(90)), comparesRules: true),
        DrainScenario(
            name: "500 messages, 30 s outage (503), then 200", count: 500, behavior: down,
            ideal: .seconds(30), idealReason: "the outage, then at once", outage: .seconds(30))
    ]
}

/// Runs the scenarios numbered in `only` (1-based), or all of them; writes the plotted one's
/// picture to `plot`, if given.
func drainBenchmark(root: URL, only: Set<Int> = [], plot: URL? = nil) async throws {
    say("-- drain at the server's pace: default settings, loopback, real time (issue 24)")
    say("   scenario | seconds | requests | refused | ideal")
    var latencyCurves: [(String, [Double])] = []
    for (index, scenario) in drainScenarios().enumerated() where only.isEmpty || only.contains(index + 1) {
        let rules: [RetryScenarios.Rules] = scenario.comparesRules ? [.defaults, .disabled] : [.defaults]
        var trace: DrainTrace?
        for rule in rules {
            let run = try await runDrain(
                scenario, rules: rule, directory: root.appendingPathComponent("drain-\(index)-\(rule)"))
            trace = trace ?? run
            if scenario.plotsLatency {
                latencyCurves.append((rule == .defaults ? "default rules" : "rules .disabled", run.sortedLatencies))
            }
        }
        if let plot, let title = scenario.plotTitle, let trace {
            let limit = scenario.behavior.limiter?.ratePerSecond
            try drainPlotSVG(trace, title: title, limitPerSecond: limit).write(
                to: plot, atomically: true, encoding: .utf8)
            say("   (wrote \(plot.path))")
        }
    }
    if let plot, latencyCurves.count == 2 {
        let picture = plot.deletingLastPathComponent().appendingPathComponent("retry-tail-latency.svg")
        try latencyPlotSVG(
            latencyCurves, title: "1,000 messages, 50% answered 500: time from send to delivered"
        ).write(to: picture, atomically: true, encoding: .utf8)
        say("   (wrote \(picture.path))")
    }
}

private func runDrain(_ scenario: DrainScenario, rules: RetryScenarios.Rules, directory: URL) async throws
    -> DrainTrace
{
    let server = try await FlakyServer(behavior: scenario.behavior)
    var configuration = Courier.Configuration()
    configuration.allowsPurgeableDirectory = true  // a scratch directory, in tmp
    rules.apply(to: &configuration)
    // What the adaptive limit's parts buy (issue 44): COURIER_BENCH_CONCURRENCY=fixed turns the
    // learned limit and pace off.
    if ProcessInfo.processInfo.environment["COURIER_BENCH_CONCURRENCY"] == "fixed" {
        configuration.concurrencyLimit = .fixed
    }
    let courier = try Courier(directory: directory, configuration: configuration)
    let trace = DrainTrace()
    let events = courier.events()
    let listener = Task { for await event in events { trace.record(event) } }
    let url = await server.url
    let start = ContinuousClock.now
    for i in 0..<scenario.count { trace.sent(try courier.send(["n": i, "text": "hello"], to: url)) }
    var total = scenario.count
    if let steady = scenario.steady {
        var next = start
        while start.duration(to: next) < steady.duration {  // bounded by duration / interval
            try await Task.sleep(until: next)
            trace.sent(try courier.send(["n": total, "text": "hello"], to: url))
            total += 1
            next = next.advanced(by: steady.interval)
        }
    }
    var during = 0
    if let outage = scenario.outage {
        try await Task.sleep(until: start.advanced(by: outage))
        during = server.statistics.requests
        server.setBehavior(.init(failureRate: 0, seed: 24))
    }
    // Polls: the drain is measured to the nearest 50 ms; the cap bounds the loop.
    while courier.pendingCount > 0 && start.duration(to: .now) < scenario.cap {
        try await Task.sleep(for: .milliseconds(50))
    }
    let elapsed = seconds(start.duration(to: .now))
    let stats = server.statistics
    let delivered = total - courier.pendingCount
    let time =
        delivered == total
        ? String(format: "%.1f", elapsed)
        : String(format: "not drained: %d of %d after %.0f", delivered, total, elapsed)
    let refused = stats.refused + (scenario.outage == nil ? 0 : stats.answered[503, default: 0])
    let ideal = scenario.ideal.map { String(format: "%.1f s", seconds($0)) } ?? "—"
    var extra = ""
    if let outage = scenario.outage {
        extra = String(
            format: "; %d requests during the outage, drained %.1f s after it", during, elapsed - seconds(outage))
    }
    if scenario.comparesRules {
        let l = trace.sortedLatencies
        extra += String(
            format: "; send to delivered p50 %.2f s, p99 %.2f s, max %.2f s; %.2f requests a message",
            RetryScenarios.percentile(0.5, of: l), RetryScenarios.percentile(0.99, of: l), l.last ?? .nan,
            Double(stats.requests) / Double(max(1, delivered)))
    }
    let name = scenario.comparesRules ? "\(scenario.name), rules \(rules)" : scenario.name
    line(name, "\(time) s | \(stats.requests) | \(refused) | \(ideal) (\(scenario.idealReason))\(extra)")
    await courier.close()
    await server.stop()
    listener.cancel()
    return trace
}

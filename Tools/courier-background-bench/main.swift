import Courier
import CourierTesting
import Foundation

// `make bench-background`: background hand-off on `SimulatedBackgroundSystem`, on virtual
// time (nothing sleeps; a run takes about a second). Line 1: an app suspended for 30 minutes
// with 500 messages and a server failing half the time, ended by the system three times on
// the way. Line 2: a 10-minute outage while suspended, then recovery. Line 3: line 1's
// scenario under the rate limiter Apple's forums report (60 s, doubling at each wake).

/// The server: answers from `answer(now)`, records when each message's attempts came (on the
/// virtual clock) and which messages it accepted.
final class Server: @unchecked Sendable {
    let lock = NSLock()
    var attempts: [MessageID: [Duration]] = [:]
    var accepted = Set<MessageID>()
    var requestTimes: [Duration] = []
    var clock: ManualClock?
    let answer: @Sendable (Duration) -> DeliveryOutcome

    init(answer: @escaping @Sendable (Duration) -> DeliveryOutcome) { self.answer = answer }

    lazy var transport = ScriptedTransport { [unowned self] request in
        lock.lock(); defer { lock.unlock() }
        let now = clock?.now.offset ?? .zero
        attempts[request.messageID, default: []].append(now)
        requestTimes.append(now)
        let outcome = answer(now)
        if outcome.isSuccess { accepted.insert(request.messageID) }
        return outcome
    }

    /// The shortest and longest gap between two attempts of one message.
    var gaps: (Duration, Duration)? {
        lock.withLock {
            let all = attempts.values.flatMap { times in zip(times, times.dropFirst()).map { $1 - $0 } }
            guard let low = all.min(), let high = all.max() else { return nil }
            return (low, high)
        }
    }
}

func seconds(_ d: Duration) -> String {
    String(format: "%.1f", Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
}

func configuration() -> Courier.Configuration {
    var c = Courier.Configuration()
    c.random = SeededRandomSource(seed: 2026).next
    c.retry = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(64))
    c.durability = .never
    c.backgroundUploads = Courier.BackgroundUploads(session: Placeholder())
    return c
}

/// Replaced by the simulation's own session.
struct Placeholder: BackgroundUploadSession {
    func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask {
        BackgroundUploadTask(identifier: -1, taskDescription: "")
    }
    func outstandingTasks() async -> [BackgroundUploadTask] { [] }
    func cancel(_ task: BackgroundUploadTask) {}
    func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void) {}
}

/// Launches the app, sends `count` messages, and sends it to the background.
func start(_ app: SimulatedApp, count: Int) async -> [MessageID] {
    await app.system.launch()
    app.courier?.pause()  // everything goes through the hand-off
    let url = URL(string: "https://api.example.com/messages")!
    let ids = (0..<count).compactMap { app.send("message \($0)", to: url) }
    await app.enterBackground()
    return ids
}

func suspended(model: SimulatedBackgroundSystem.Model, label: String) async -> String {
    let random = SeededRandomSource(seed: 500)
    let server = Server { _ in random.next() % 2 == 0 ? .response(status: 200) : .response(status: 500) }
    let app = SimulatedApp(server: server.transport, configuration: configuration(), model: model)
    server.clock = app.system.manualClock
    let ids = await start(app, count: 500)
    // 30 minutes suspended; the system ends the app at minutes 7, 15 and 22 (memory pressure).
    for minute in 1...30 {
        await app.system.advance(by: .seconds(60))
        if [7, 15, 22].contains(minute), app.system.appState != .notRunning { app.system.kill() }
    }
    let s = app.system.statistics
    let accepted = server.lock.withLock { server.accepted }
    let delivered = Set(ids).intersection(accepted).count
    let last = server.lock.withLock {
        server.attempts.filter { accepted.contains($0.key) }.compactMap { $0.value.last }.max()
    }
    let gaps = server.gaps.map { "\(seconds($0.0))–\(seconds($0.1)) s" } ?? "none"
    let lost = await drain(app, server, ids)
    let pending = ids.count - delivered
    return "\(label)suspended 30 min, \(ids.count) messages, server failing 50%: delivered \(delivered) while suspended"
        + (pending == 0
            ? " (the last at \(last.map { seconds($0) } ?? "?") s)"
            : ", \(pending) still pending (delivered once the app runs)")
        + ", \(s.tasksCreated) tasks, \(s.wakes) wakes, \(s.relaunches) relaunches after the system ended the app, "
        + "gaps between attempts of one message \(gaps), \(lost) lost, \(s.inFlightTwice) in flight twice"
        + " (simulated: wake \(seconds(model.wakeDelay)) s after a completion, rate limiter "
        + "\(seconds(model.rateLimiterInitialDelay)) s doubling to \(seconds(model.rateLimiterMaximumDelay)) s)"
}

/// Brings the app back and runs it until every message is delivered (at most 2 virtual
/// hours): how many were lost, that is never delivered.
func drain(_ app: SimulatedApp, _ server: Server, _ ids: [MessageID]) async -> Int {
    await app.enterForeground()
    for _ in 0..<240 where !Set(ids).isSubset(of: server.lock.withLock({ server.accepted })) {
        await app.system.advance(by: .seconds(30))
        await app.courier?.settle()
    }
    return Set(ids).subtracting(server.lock.withLock { server.accepted }).count
}

func outage() async -> String {
    let outageEnd = Duration.seconds(600)
    let server = Server { now in now < outageEnd ? .response(status: 503) : .response(status: 200) }
    let app = SimulatedApp(server: server.transport, configuration: configuration())
    server.clock = app.system.manualClock
    let ids = await start(app, count: 100)
    await app.system.advance(by: .seconds(1800))
    let times = server.lock.withLock { server.requestTimes }
    let duringOutage = times.filter { $0 < outageEnd }.count
    let first = times.filter { $0 < .seconds(1) }.count
    let lastDelivery = server.lock.withLock {
        server.attempts.filter { server.accepted.contains($0.key) }.compactMap { $0.value.last }.max()
    }
    let delivered = Set(ids).intersection(server.lock.withLock { server.accepted }).count
    let recovery =
        lastDelivery.map { "last delivery \(seconds($0 - outageEnd)) s after recovery" } ?? "nothing delivered"
    let lost = await drain(app, server, ids)
    return "outage of 10 min while suspended, \(ids.count) messages: \(duringOutage) requests during the outage "
        + "(\(first) in its first second, before the destination was known down, then \(duringOutage - first) probes), "
        + "\(recovery), delivered \(delivered) while suspended, \(lost) lost, \(app.system.statistics.inFlightTwice) "
        + "in flight twice"
}

print(await suspended(model: SimulatedBackgroundSystem.Model(), label: ""))
print(await outage())
var apple = SimulatedBackgroundSystem.Model()
apple.rateLimiterInitialDelay = .seconds(60)
apple.rateLimiterMaximumDelay = .seconds(3600)
print(await suspended(model: apple, label: "with Apple's reported rate limiter: "))

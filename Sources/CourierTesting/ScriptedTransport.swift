import CourierKit
import CourierLog
import Foundation

/// A transport that answers from a script instead of the network, and records every request.
///
///     let transport = ScriptedTransport { request in
///         request.attempt < 3 ? .response(status: 500) : .response(status: 200)
///     }
///
/// With `holdResponses = true`, requests wait until `release` lets them answer, so tests can
/// see how many are in flight at once.
public final class ScriptedTransport: DeliveryTransport {
    public typealias Script = @Sendable (DeliveryRequest) -> DeliveryOutcome

    private let lock = NSLock()
    private let script: Script
    private let answering: (@Sendable (DeliveryRequest) -> ServerAnswer)?
    private var recorded: [DeliveryRequest] = []
    /// Held requests; each is resumed with `true` ("it was held").
    private var held: [(UUID, CheckedContinuation<Bool, Never>)] = []
    private var hold = false
    private var inFlight = 0
    private var maxInFlight = 0
    private var countWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
    private var shutdowns = 0

    public init(_ script: @escaping Script = { _ in .response(status: 200) }) {
        self.script = script
        answering = nil
    }

    /// A server that answers each request with `answer`'s status, headers and body
    /// (`exchange(_:)`, what `Courier.delivered(_:)` returns).
    public init(answering answer: @escaping @Sendable (DeliveryRequest) -> ServerAnswer) {
        script = { .response(status: answer($0).status) }  // unused: `respond` calls `answering` once
        answering = answer
    }

    /// Every request so far, in arrival order.
    public var requests: [DeliveryRequest] { lock.withLock { recorded } }
    /// The most requests that were in flight at the same time.
    public var maximumInFlight: Int { lock.withLock { maxInFlight } }
    /// How many times `shutdown()` was called (Courier never shuts down a transport it was given).
    public var shutdownCount: Int { lock.withLock { shutdowns } }
    /// Requests waiting to be released.
    public var heldCount: Int { lock.withLock { held.count } }

    /// While true, requests wait for `release`.
    public var holdResponses: Bool {
        get { lock.withLock { hold } }
        set { lock.withLock { hold = newValue } }
    }

    /// Lets up to `count` held requests answer (all if nil), oldest first.
    public func release(_ count: Int? = nil) {
        let released = lock.withLock { () -> [CheckedContinuation<Bool, Never>] in
            let n = min(count ?? held.count, held.count)
            defer { held.removeFirst(n) }
            return held.prefix(n).map(\.1)
        }
        for c in released { c.resume(returning: true) }
    }

    /// Returns once at least `count` requests have arrived.
    public func waitForRequests(_ count: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = lock.withLock { () -> Bool in
                if recorded.count >= count { return true }
                countWaiters.append((count, c))
                return false
            }
            if ready { c.resume() }
        }
    }

    public func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome { await respond(request).0 }

    public func exchange(_ request: DeliveryRequest) async -> (DeliveryOutcome, ServerAnswer?) {
        await respond(request)
    }

    /// Records `request`, holds it while `holdResponses`, then answers it from the script (the
    /// answer asked for once per request).
    private func respond(_ request: DeliveryRequest) async -> (DeliveryOutcome, ServerAnswer?) {
        // A request is recorded and, while `holdResponses`, held in one critical section: a test
        // that waits for it (`waitForRequests`) and then releases it can never release it before
        // it is held. Held requests still honour cancellation, as real transports do.
        let key = UUID()
        let wasHeld = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let (holding, ready) = lock.withLock { () -> (Bool, [CheckedContinuation<Void, Never>]) in
                    recorded.append(request)
                    inFlight += 1
                    maxInFlight = max(maxInFlight, inFlight)
                    let ready = countWaiters.filter { $0.0 <= recorded.count }.map(\.1)
                    countWaiters.removeAll { $0.0 <= recorded.count }
                    guard hold, !Task.isCancelled else { return (false, ready) }
                    held.append((key, c))
                    return (true, ready)
                }
                for waiter in ready { waiter.resume() }
                if !holding { c.resume(returning: false) }
            }
        } onCancel: {
            let c = lock.withLock { () -> CheckedContinuation<Bool, Never>? in
                guard let i = held.firstIndex(where: { $0.0 == key }) else { return nil }
                return held.remove(at: i).1
            }
            c?.resume(returning: true)
        }
        if !wasHeld {
            // A real request never answers without suspending: neither does this one, so the
            // engine's runners take turns with the rest of the app (and of a test suite) as they
            // would over a network.
            await Task.yield()
        }
        lock.withLock { inFlight -= 1 }
        if Task.isCancelled { return (.failure(TransportFailure(.cancelled, "cancelled")), nil) }
        if let answer = answering?(request) { return (.response(status: answer.status), answer) }
        let outcome = script(request)
        guard case .response(let status, _) = outcome else { return (outcome, nil) }
        return (outcome, ServerAnswer(status: status))
    }
}

extension ScriptedTransport {
    public func shutdown() async { lock.withLock { shutdowns += 1 } }
}

/// All state is guarded by `lock`.
extension ScriptedTransport: @unchecked Sendable {}

/// A seeded, thread-safe random source for `Courier.Configuration.random`: the log's
/// `SplitMix64` behind a lock.
public final class SeededRandomSource: Sendable {
    private let generator: Locked<SplitMix64>

    public init(seed: UInt64) { generator = Locked(SplitMix64(seed: seed)) }

    /// The next value. Pass `source.next` as `configuration.random`.
    public func next() -> UInt64 { generator.withLock { $0.next() } }
}

/// Message ids 00000000-0000-0000-0000-000000000001, …2, … for readable, reproducible tests.
public final class SequentialMessageIDs: Sendable {
    private let issued = Locked<UInt64>(0)
    public init() {}
    public func next() -> MessageID {
        let value = issued.withLock { n -> UInt64 in
            n += 1; return n
        }
        let hex = String(value, radix: 16)
        let padded = String(repeating: "0", count: 12 - hex.count) + hex
        return MessageID("00000000-0000-0000-0000-" + padded)!
    }
}

import CourierKit
import CourierTesting
import Foundation

extension BackgroundScenarios {
    /// The server: answers from `answer(now)`, records when each message's attempts came (on
    /// the virtual clock) and which messages it accepted.
    final class Server: @unchecked Sendable {
        // Why `@unchecked Sendable`: every mutable property is read and written under `lock`
        // (`clock` is set once, before the first request).
        private let lock = NSLock()
        private var attempts: [MessageID: [Duration]] = [:]
        private var acceptedIDs = Set<MessageID>()
        private var times: [Duration] = []
        var clock: ManualClock?
        let answer: @Sendable (Duration) -> DeliveryOutcome

        init(answer: @escaping @Sendable (Duration) -> DeliveryOutcome) { self.answer = answer }

        lazy var transport = ScriptedTransport { [unowned self] request in
            lock.withLock {
                let now = clock?.now.offset ?? .zero
                attempts[request.messageID, default: []].append(now)
                times.append(now)
                let outcome = answer(now)
                if outcome.isSuccess { acceptedIDs.insert(request.messageID) }
                return outcome
            }
        }

        var accepted: Set<MessageID> { lock.withLock { acceptedIDs } }
        var requestTimes: [Duration] { lock.withLock { times } }

        /// When the last accepted message's accepted attempt came.
        var lastAcceptedAttempt: Duration? {
            lock.withLock { attempts.filter { acceptedIDs.contains($0.key) }.compactMap { $0.value.last }.max() }
        }

        /// The shortest and longest gap between two attempts of one message.
        var gaps: (shortest: Duration, longest: Duration)? {
            lock.withLock {
                let all = attempts.values.flatMap { times in zip(times, times.dropFirst()).map { $1 - $0 } }
                guard let low = all.min(), let high = all.max() else { return nil }
                return (low, high)
            }
        }
    }

    /// Replaced by the simulation's own session (`SimulatedBackgroundSystem.configure`).
    struct Placeholder: BackgroundUploadSession {
        func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask {
            BackgroundUploadTask(identifier: -1, taskDescription: "")
        }
        func outstandingTasks() async -> [BackgroundUploadTask] { [] }
        func cancel(_ task: BackgroundUploadTask) {}
        func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void) {}
    }
}

import CourierKit
import Foundation

extension SimulatedBackgroundSystem {
    /// One app process's view of the system's background session. Once its process is dead
    /// (killed, force-quit, or replaced by a relaunch), it does nothing: a dead process makes
    /// no task, cancels none and hears nothing.
    final class Session: BackgroundUploadSession {
        let system: SimulatedBackgroundSystem
        let process: Int

        init(system: SimulatedBackgroundSystem, process: Int) {
            self.system = system
            self.process = process
        }

        func makeUploadTask(_ request: BackgroundUploadRequest) -> BackgroundUploadTask {
            let (task, hook) = system.state.withLock { s -> (BackgroundUploadTask, (@Sendable () -> Void)??) in
                guard s.processAlive, s.process == process else {
                    return (BackgroundUploadTask(identifier: -1, taskDescription: request.taskDescription), nil)
                }
                let task = BackgroundUploadTask(identifier: s.nextIdentifier, taskDescription: request.taskDescription)
                s.nextIdentifier += 1
                let now = system.clock.now.offset
                let begin = Duration.seconds(request.earliestBeginDate.timeIntervalSince(system.epoch))
                // The rate limiter's delay runs from the task's creation, not from its begin date
                // ("the task does not start until that delay has expired"); a discretionary
                // task waits on top of that.
                let inBackground = s.appState != .foreground
                let limiter = inBackground ? s.rateLimiterDelay : .zero
                let discretionary = inBackground ? system.model.discretionaryDelay : .zero
                let key = request.headers["Idempotency-Key"]
                if s.carries(key) { s.statistics.inFlightTwice += 1 }
                s.tasks[task.identifier] = SystemTask(
                    task: task, request: request, startOffset: max(begin, now + limiter) + discretionary,
                    process: process)
                s.statistics.tasksCreated += 1
                // The kill happens after the task exists: the process dies before it logs it.
                return (task, SimulatedBackgroundSystem.tick(&s))
            }
            if let hook { hook?() }
            return task
        }

        func outstandingTasks() async -> [BackgroundUploadTask] {
            system.state.withLock { s in
                guard s.processAlive, s.process == process else { return [] }
                return (s.tasks.values.map(\.task) + s.running.values.map(\.task.task))
                    .sorted { $0.identifier < $1.identifier }
            }
        }

        func cancel(_ task: BackgroundUploadTask) {
            let (cancelled, hook) = system.state.withLock { s -> (Bool, (@Sendable () -> Void)??) in
                guard s.processAlive, s.process == process else { return (false, nil) }
                let hook = SimulatedBackgroundSystem.tick(&s)
                guard s.tasks.removeValue(forKey: task.identifier) != nil else { return (false, hook) }
                s.statistics.tasksCancelled += 1
                let completion = BackgroundUploadCompletion(
                    task: task, outcome: .failure(TransportFailure(.cancelled, "cancelled")))
                // Heard at the next step if the app runs, else at the wake once the session is idle.
                s.held.append(completion)
                return (true, hook)
            }
            if let hook { hook?() }
            _ = cancelled
        }

        func deliverCompletions(to handler: @escaping @Sendable (BackgroundUploadCompletion) async -> Void) {
            system.state.withLock { s in
                guard s.processAlive, s.process == process else { return }
                s.handler = handler
                s.handlerProcess = process
            }
        }
    }

    /// The transport of the app's own engine: the system's transport, counting requests of a
    /// message that a live task also carries (in flight twice).
    struct EngineTransport: DeliveryTransport {
        let system: SimulatedBackgroundSystem

        func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
            let key = request.messageID.description
            let alive = system.state.withLock { s -> Bool in
                guard s.processAlive else { return false }
                s.statistics.engineRequests += 1
                if s.carries(key) { s.statistics.inFlightTwice += 1 }
                s.engineInFlight[key, default: 0] += 1
                return true
            }
            // A dead process sends nothing.
            guard alive else { return .failure(TransportFailure(.cancelled, "the app process is dead")) }
            let outcome = await system.transport.deliver(request)
            system.state.withLock { s in
                if let n = s.engineInFlight[key] { s.engineInFlight[key] = n > 1 ? n - 1 : nil }
            }
            return outcome
        }
    }
}

/// Why `Session` is `Sendable`: it holds only immutable references; state is the system's mutex.
extension SimulatedBackgroundSystem.Session: @unchecked Sendable {}

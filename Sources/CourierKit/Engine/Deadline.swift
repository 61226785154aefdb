/// The whole-request deadline every transport enforces (`Configuration.requestTimeout`):
/// connection, upload, response head and body all count, unlike URLSession's
/// `timeoutInterval`, which only limits idle time between bytes. Platform-neutral, so the
/// same code runs, and is tested, on every platform.
///
/// The operation runs in a child task; a second child sleeps on `clock` until the deadline.
/// Whichever ends first decides; the other is cancelled. When the deadline wins, the
/// operation is cancelled and its (cancelled) outcome is replaced by `.timeout`.
/// The operation says what the server answered too (`DeliveryTransport.exchange`).
func withDeadline(
    _ timeout: Duration, clock: any Clock<Duration>,
    _ operation: @escaping @Sendable () async -> (DeliveryOutcome, ServerAnswer?)
) async -> (DeliveryOutcome, ServerAnswer?) {
    await withTaskGroup(of: (DeliveryOutcome, ServerAnswer?)?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            // Thrown when cancelled: the operation ended first.
            // At most 2^31 s (68 years): a clock's instant plus "never" must not overflow.
            do { try await clock.sleep(for: min(timeout, .seconds(1 << 31))) } catch { return nil }
            let message = "no complete response within \(timeout) (Configuration.requestTimeout)"
            return (.failure(TransportFailure(.timeout, message)), nil)
        }
        // At most two results (the sleeper's nil when cancelled is skipped): the loop ends.
        for await case let result? in group {
            group.cancelAll()
            return result
        }
        // Only when the sleeper was cancelled and the operation produced nothing: impossible,
        // since the operation always returns an outcome; cancelled is the honest answer.
        return (.failure(TransportFailure(.cancelled, "cancelled")), nil)
    }
}

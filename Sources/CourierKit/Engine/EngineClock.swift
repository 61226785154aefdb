import CourierLog

/// The engine's view of an injected `any Clock<Duration>`: elapsed time since the courier
/// opened, and a sleep until an elapsed time. Opening the existential once here keeps the
/// rest of the engine free of generic instants.
struct EngineClock: Sendable {
    let elapsed: @Sendable () -> Duration
    let sleep: @Sendable (_ untilElapsed: Duration) async throws -> Void

    init(_ clock: any Clock<Duration>) {
        self = Self.open(clock)
    }

    private init(
        elapsed: @escaping @Sendable () -> Duration, sleep: @escaping @Sendable (Duration) async throws -> Void
    ) {
        self.elapsed = elapsed
        self.sleep = sleep
    }

    private static func open<C: Clock>(_ clock: C) -> EngineClock where C.Duration == Duration {
        let start = clock.now
        return EngineClock(
            elapsed: { start.duration(to: clock.now) },
            sleep: { try await clock.sleep(until: start.advanced(by: $0), tolerance: nil) })
    }
}

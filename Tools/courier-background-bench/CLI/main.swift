@_spi(CourierTesting) import CourierKit
import BackgroundScenarios

// `make bench-background`: background hand-off on `SimulatedBackgroundSystem`, on virtual
// time (nothing sleeps; a run takes about a second). Line 1: an app suspended for 30 minutes
// with 500 messages and a server failing half the time, ended by the system three times on
// the way. Line 2: a 10-minute outage while suspended, then recovery. Line 3: line 1's
// scenario under the rate limiter Apple's forums report (60 s, doubling at each wake).
// Deterministic: the same build prints the same figures every run. `make test` asserts what
// they promise (BackgroundDeliveryPromiseTests).

print(await BackgroundScenarios.suspended())
print(await BackgroundScenarios.outage())
let apple = await BackgroundScenarios.suspended(model: BackgroundScenarios.applesRateLimiter)
print("with Apple's reported rate limiter: \(apple)")
// Line 4: a message sent 1 s before the app leaves the screen, uploads made in the background
// held an hour by the system: the engine's window first (now), and the hand-off at once (before).
let engineFirst = await BackgroundScenarios.justTyped()
let handOffFirst = await BackgroundScenarios.justTyped(window: Courier.handOffReserve)
print("a message sent 1 s before leaving the screen: engine first \(engineFirst); hand-off first \(handOffFirst)")

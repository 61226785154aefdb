import CourierKit
import Foundation

// What an app gets from Courier with default traits, checked from outside the package:
// 1. opening with no transport: on Linux, a `.transportUnavailable` error that names the trait,
//    thrown before the directory is touched; on Apple platforms, URLSession and no error;
// 2. with a transport of the app's own, a message is delivered on every platform.

/// Answers 200 to everything, counting requests: the app's own transport.
final class AcceptingTransport: DeliveryTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var received = 0
    var count: Int { lock.withLock { received } }

    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        lock.withLock { received += 1 }
        return .response(status: 200, retryAfter: nil)
    }
}

func fail(_ why: String) -> Never {
    print("consumer-check: FAILED: \(why)")
    exit(1)
}

let root = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-check-\(getpid())")
defer { try? FileManager.default.removeItem(at: root) }

// 1. The default transport.
let untouched = root.appendingPathComponent("default-transport")
#if os(Linux)
do {
    _ = try Courier(directory: untouched)
    fail("a courier opened on Linux without the AsyncHTTPClientTransport trait")
} catch {
    guard error.code == .transportUnavailable, error.message.contains("traits: [\"AsyncHTTPClientTransport\"]")
    else {
        fail("expected .transportUnavailable naming the trait, got \(error)")
    }
    guard !FileManager.default.fileExists(atPath: untouched.path) else {
        fail("the failed open created its directory")
    }
    print("consumer-check: without the trait, opening fails with: \(error)")
}
#else
do { await Courier(directory: untouched).close() } catch { fail("no default transport: \(error)") }
#endif

// 2. The app's own transport.
let transport = AcceptingTransport()
var configuration = Courier.Configuration()
configuration.allowsPurgeableDirectory = true  // a scratch directory, in tmp
configuration.transport = transport
do {
    let courier = try Courier(directory: root.appendingPathComponent("own-transport"), configuration: configuration)
    let id = try courier.send(["text": "hi"], to: URL(string: "https://example.com/messages")!)
    try await courier.delivered(id)
    await courier.close()
} catch {
    fail("delivery through the app's own transport: \(error)")
}
guard transport.count == 1 else { fail("expected 1 request, the transport saw \(transport.count)") }
print("consumer-check: a message sent through the app's own transport was delivered (1 request)")

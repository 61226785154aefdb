@_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

// The code of README.md and the DocC articles, compiled here (the iOS-only examples are
// type-checked for iOS by `make ios-check`, in Tools/doc-examples/ios). Each region between
// `// snippet: NAME` and `// snippet end` is the code block that follows `<!-- snippet: NAME -->`
// in a document, byte for byte once dedented: `make test` runs Tools/doc-examples/check.py,
// which fails on any difference, and `make doc-snippets` copies the regions into the documents.
// Nothing here runs against a server: the functions are compiled, and a few are run as tests.

struct Order: Encodable {
    var id: Int
    var items: Int
}

struct Tokens {
    func current() async throws -> String { "token" }
}

struct Conversation {
    var id = "chat-7"
}

/// GettingStarted.md and UsingCourier.md, with what they take from the app as parameters.
func gettingStarted(serverURL: URL, order: Order, csv: Data, conversation: Conversation) async throws {
    // snippet: open
    let dir = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        .appendingPathComponent("outbox")
    let courier = try await Courier.open(directory: dir)
    // snippet end
    // snippet: overview
    let id = try courier.send(["text": "hi"], to: serverURL)   // returns at once; never lost from here on
    // snippet end
    try await courier.delivered(id)
    // snippet: send
    let sent = try courier.send(["text": "hi"], to: serverURL)          // [String: Any] as JSON
    try courier.send(order, to: serverURL)                                // any Encodable
    try courier.send(data: csv, contentType: "text/csv", to: serverURL)   // bytes as they are
    // snippet end
    // snippet: ordering-key
    try courier.send(["text": "first"], to: serverURL, orderingKey: conversation.id)
    try courier.send(["text": "second"], to: serverURL, orderingKey: conversation.id)
    // snippet end
    // snippet: delivered
    try await courier.delivered(sent)   // throws CourierError(.abandoned) if the policy gave up

    for await event in courier.events() {
        if case .delivered(let id, let attempts) = event { print(id, "after", attempts, "attempts") }
    }
    // snippet end
    // snippet: close
    await courier.close()   // stops delivery, syncs the log, releases the directory
    // snippet end
}

func credentials(tokens: Tokens) -> Courier.Configuration {
    var configuration = Courier.Configuration()
    // snippet: credentials
    configuration.prepareRequest = { request in
        request.headers["Authorization"] = "Bearer \(try await tokens.current())"
    }
    // snippet end
    return configuration
}

/// AccountsAndConsent.md: an app's session, with what it keeps of its accounts.
final class AccountSession: Sendable {
    let courier: Courier
    let tokens = Keychain()
    init(courier: Courier) { self.courier = courier }

    /// A stand-in for the app's credential store.
    final class Keychain: Sendable {
        func token(forAccount account: String) async throws -> String { "token-\(account)" }
    }

    static func configuration(tokens: Keychain) -> Courier.Configuration {
        // snippet: accounts-prepare
        var configuration = Courier.Configuration()
        configuration.prepareRequest = { request in
            // The message's account, from its tags: never "whoever is signed in now".
            guard let tag = request.tags.first(where: { $0.hasPrefix("account:") }) else { return }
            let token = try await tokens.token(forAccount: String(tag.dropFirst("account:".count)))
            request.headers["Authorization"] = "Bearer \(token)"
        }
        // snippet end
        return configuration
    }

    func post(_ text: String, account: String, serverURL: URL) throws {
        // snippet: accounts-send
        try courier.send(["text": text], to: serverURL, tags: ["account:\(account)"])
        // snippet end
    }

    func switchAccount(from old: String, to new: String) {
        // snippet: accounts-switch
        courier.hold(tagged: "account:\(old)")     // its messages wait, across restarts
        courier.release(tagged: "account:\(new)")  // if it was held before, its messages go now
        // snippet end
    }

    func logOut(_ account: String) {
        // snippet: accounts-logout
        let dropped = courier.cancel(tagged: "account:\(account)")   // never sent, across restarts
        // snippet end
        _ = dropped
    }

    func consent(_ granted: Bool, event: [String: Any], analyticsURL: URL) throws {
        // snippet: consent
        courier.hold(tagged: "analytics")                     // at first launch, before asking
        try courier.send(event, to: analyticsURL, tags: ["analytics"])   // waits on disk
        if granted {
            courier.release(tagged: "analytics")              // everything held goes now
        } else {
            courier.cancel(tagged: "analytics")               // and keep holding new ones
        }
        // snippet end
    }
}

/// UsingCourier.md's "A bounded outbox".
func boundedOutbox(_ courier: Courier) -> (Courier.Configuration, Int) {
    // snippet: bounded-outbox
    var configuration = Courier.Configuration()
    configuration.maximumPendingMessages = 1_000                // nil, the default: no count bound
    configuration.whenFull["analytics"] = .dropOldest           // the newest events matter most
    // At the bound, any send drops the oldest analytics message; with none pending, it throws `.storageFull`.
    // snippet end
    // snippet: cancel-all
    let withdrawn = courier.cancelAll()   // logged: none of them is sent again, across restarts
    // snippet end
    return (configuration, withdrawn)
}

/// UsingCourier.md's expiry per message.
func expiry(_ courier: Courier, serverURL: URL) throws {
    // snippet: expiry
    try courier.send(["status": "typing"], to: serverURL, expiry: .seconds(30))   // default: nil, no expiry of its own
    // snippet end
}

/// UsingCourier.md's "Compressed bodies".
func gzip() -> Courier.Configuration {
    // snippet: gzip
    var configuration = Courier.Configuration()
    configuration.destinations["https://api.example.com"] = DestinationOptions(gzip: true)   // default: false
    // snippet end
    return configuration
}

/// UsingCourier.md's "Batching".
func batching() -> Courier.Configuration {
    // snippet: batching
    var configuration = Courier.Configuration()
    configuration.destinations["https://events.example.com"] = DestinationOptions(
        batching: Batching(maximumCount: 50, maximumBytes: 256 << 10, maximumDelay: .seconds(2)),  // default: nil
        gzip: true)
    // snippet end
    return configuration
}

/// UsingCourier.md's "Batching": per-message answers.
func batchItemStatuses() -> Courier.Configuration {
    var configuration = Courier.Configuration()
    // snippet: batch-item-statuses
    configuration.batchItemStatuses = { answer, _ in  // the server answers {"<message id>": 201, …}
        guard let byKey = try? JSONDecoder().decode([String: Int].self, from: answer.body) else { return nil }
        return Dictionary(uniqueKeysWithValues: byKey.compactMap { key, status in MessageID(key).map { ($0, status) } })
    }
    // snippet end
    return configuration
}

/// UsingCourier.md's "Batching": another body.
func batchBody() -> Courier.Configuration {
    var configuration = Courier.Configuration()
    // snippet: batch-body
    configuration.batchBody = { messages in  // default: nil, the JSON array; here one body per line (NDJSON)
        Data(messages.map { String(decoding: $0.body, as: UTF8.self) }.joined(separator: "\n").utf8)
    }
    // snippet end
    return configuration
}

/// UsingCourier.md's "The server's answer".
func serverAnswer(_ courier: Courier, serverURL: URL) async throws {
    // snippet: server-answer
    // configuration.answerHeaders = ["Location"]              // default: no header kept
    let id = try courier.send(["text": "hi"], to: serverURL)
    let answer = try await courier.delivered(id)             // status, kept headers, body (≤ 16 KiB)
    let serverID = try JSONDecoder().decode([String: String].self, from: answer.body)["id"]
    // snippet end
    _ = serverID
}

/// UsingCourier.md's "Replaceable messages".
func replacing(_ courier: Courier, serverURL: URL) throws {
    // snippet: replacing
    try courier.send(["lat": 48.85, "lon": 2.35], to: serverURL, replacing: "location")
    try courier.send(["lat": 48.86, "lon": 2.34], to: serverURL, replacing: "location")   // the first is withdrawn
    // snippet end
}

/// UsingCourier.md's tour of the whole API.
func wholeAPI(appSupport: URL, serverURL: URL, csv: Data) async throws {
    // snippet: whole-api
    var configuration = Courier.Configuration()
    configuration.retry = RetryPolicy(initialDelay: .seconds(1), multiplier: 2, maximumDelay: .seconds(300))
    configuration.maximumConcurrentDeliveries = 64  // per destination, adaptive from 4 (concurrencyLimit)
    configuration.requestTimeout = .seconds(30)

    let courier = try await Courier.open(directory: appSupport.appendingPathComponent("outbox"),
                                         configuration: configuration)

    // Fire and forget: the message is on disk when this returns. Callable from the main thread.
    let id = try courier.send(["text": "hi"], to: serverURL)

    // async/await: wait for this one message.
    try await courier.delivered(id)          // throws CourierError(.abandoned) if the policy gave up

    // Callbacks (called once, on a background thread; hop to the main actor yourself).
    try courier.send(["text": "hi"], to: serverURL,
                     onDelivered: { id in print("delivered", id) },
                     onAbandoned: { id, error in print("gave up on", id, error) })

    // Encodable values and raw bytes.
    try courier.send(Order(id: 7, items: 3), to: serverURL)
    try courier.send(data: csv, contentType: "text/csv", to: serverURL)

    // A screen: the pending messages, then everything that happens after them (none missed).
    let (pending, events) = await courier.pendingMessagesAndEvents()
    print(pending.count, "pending")
    for await event in events {
        switch event {
        case .enqueued(let id): print(id, "on disk")
        case .attemptStarted(let id, let number): print(id, "attempt", number)
        case .failed(let id, let attempt, let outcome, let next):         // outcome: status or transport failure
            print(id, "attempt", attempt, "failed:", outcome, "next at", next ?? "never")
        case .delivered(let id, let attempts): print(id, "delivered after", attempts)
        case .abandoned(let id, let attempts, let reason): print(id, "abandoned after", attempts, reason)
        case .cancelled(let id): print(id, "cancelled")                  // courier.cancel(id)
        case .handedOff(let id, let attempt): print(id, "attempt", attempt, "handed to iOS")
        case .storageFailed(let error): print("storage:", error.message)   // .storageFull: the disk is full
        case .destinationDown(let origin, let failures): print(origin, "down after", failures)
        case .destinationRecovered(let origin, let downFor, let released):
            print(origin, "back after", downFor, released, "released")
        case .missedEvents(let count): print(count, "missed: read the state again")  // this reader fell behind
        @unknown default: print(event)                                     // cases a later version adds
        }
    }

    courier.cancel(id)                       // withdraw a pending message for good; true if it was pending
    print(courier.pendingCount)              // messages not yet delivered
    await courier.waitUntilIdle()            // returns when nothing is pending
    await courier.close()                    // stops delivery, syncs the log, releases the directory
    // snippet end
}

/// Catching errors by code, as UsingCourier.md shows.
func handlingErrors(_ courier: Courier, serverURL: URL) -> String {
    // snippet: errors
    do {
        try courier.send(["text": "hi"], to: serverURL)
        return "sent"
    } catch {
        switch error.code {
        case .storageFull: return "the disk is full: try again once messages have drained"
        case .invalidJSON, .invalidURL, .invalidHeaders, .invalidOrderingKey, .invalidTags, .messageTooLarge:
            return "a bug in the app: \(error)"
        case .invalidConfiguration, .directoryLocked, .unsuitableDirectory, .protectedDataUnavailable,
             .storageFailed, .transportUnavailable, .closed, .abandoned, .cancelled, .unknownMessage:
            return error.localizedDescription   // its message, for an alert
        @unknown default: return error.localizedDescription   // codes a later version adds
        }
    }
    // snippet end
}

@Suite(.timeLimit(.minutes(1))) struct DocumentationExampleTests {
    // snippet: testing
    @Test func aFailedMessageIsRetriedAfterOneSecond() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt < 2 ? .response(status: 500) : .response(status: 200) }
        var configuration = Courier.Configuration()
        configuration.clock = clock
        configuration.transport = transport
        configuration.retry = RetryPolicy(jitter: .none)
        configuration.allowsPurgeableDirectory = true   // a test's scratch folder, in tmp
        let courier = try await Courier.open(directory: temporaryDirectory, configuration: configuration)

        let id = try courier.send(["text": "hi"], to: URL(string: "https://example.com/inbox")!)
        await courier.settle()                    // the first attempt ran and failed
        await clock.advance(by: .seconds(1))      // virtual time: the retry is due
        try await courier.delivered(id)
        #expect(transport.requests.count == 2)
        await courier.close()
    }
    // snippet end

    @Test func virtualTimeDrivesTheRetries() async throws {
        let tmp = temporaryDirectory, url = URL(string: "https://example.com/inbox")!
        // snippet: testing-aids
        let clock = ManualClock()
        var config = Courier.Configuration()
        config.clock = clock
        config.transport = ScriptedTransport { $0.attempt < 3 ? .response(status: 500) : .response(status: 200) }
        config.allowsPurgeableDirectory = true            // tmp: fine for a test
        let courier = try await Courier.open(directory: tmp, configuration: config)
        let id = try courier.send(["n": 1], to: url)
        for _ in 0..<2 {
            await courier.settle()                // an attempt ran and failed; its retry is timed
            await clock.advance(by: .seconds(30)) // virtual time: the retry is due (backoff ≤ 30 s)
        }
        try await courier.delivered(id)
        // snippet end
        await courier.close()
    }

    /// One folder per test (a new suite value each), removed when the test ends.
    private let scratch = TemporaryDirectory()
    var temporaryDirectory: URL { scratch.url }

    @Test func anErrorNamesItsCauseForAnAlert() async throws {
        let courier = try await Courier.open(directory: temporaryDirectory, configuration: {
            var configuration = Courier.Configuration()
            configuration.transport = ScriptedTransport()
            configuration.allowsPurgeableDirectory = true
            return configuration
        }())
        #expect(handlingErrors(courier, serverURL: URL(string: "ftp://example.com")!).contains("a bug in the app"))
        await courier.close()
        #expect(handlingErrors(courier, serverURL: URL(string: "https://example.com")!).contains("closed"))
    }
}

import CourierLog
import Foundation
import Logging

extension Courier {
    /// Delivery order between messages to the same URL.
    public enum DeliveryOrder: Sendable, Hashable {
        /// Messages are independent: a failing one never holds back another. The default.
        case unordered
        /// Per destination URL, a message is sent only after every earlier one to that URL was
        /// delivered or abandoned. Different URLs still proceed independently. The special case
        /// of ordering keys where the key is the URL: a message sent with an `orderingKey` is
        /// ordered by that key instead.
        case fifoPerDestination
    }

    /// Per tag, whether its messages may be dropped when `Configuration.maximumPendingMessages`
    /// are pending (`Configuration.whenFull`).
    public enum WhenFull: Sendable, Hashable {
        /// The tag's messages are never dropped, even one that also has a `.dropOldest` tag. (A
        /// send at the bound throws `.storageFull` and writes nothing unless a message it may drop
        /// is pending.)
        case refuse
        /// At the bound, any send (whatever its own tags) drops the oldest pending message that
        /// has a `.dropOldest` tag, in the same critical section as the send: it is abandoned
        /// (`AbandonReason.dropped`: an `abandoned` record, the `.abandoned` event, and its
        /// `onAbandoned` callback, on the thread of that `send`), even if an attempt of it is
        /// under way (whose outcome is then ignored). So droppable traffic never blocks the rest.
        /// A message with a `.refuse` tag too is spared.
        case dropOldest
    }

    /// How a batch's body is made from its messages' keys and bodies (`Configuration.batchBody`).
    public typealias BatchBody = @Sendable (_ messages: [(key: String, body: Data)]) -> Data

    /// Settings of a `Courier`. A `Sendable` value: build it, then pass it to `init`.
    public struct Configuration: Sendable {
        /// When to try again. The default is `RetryPolicy()`: 1 s × 2ⁿ⁻¹ capped at 300 s, full
        /// jitter, retry every failure forever.
        public var retry = RetryPolicy()
        /// How many POSTs may be in flight at once, in all and to one destination. The default is
        /// 64: with the default `concurrencyLimit` (`.adaptive`), each destination starts at 4
        /// and grows toward this while it answers, and is cut back when it refuses for
        /// load (figures: the DocC article "Retry and backoff"). With `.fixed`, exactly this many.
        public var maximumConcurrentDeliveries = 64
        /// How the limit per destination is found. The default is `.adaptive`: starts low, grows
        /// on success, shrinks on 429, 503 and timeouts (never on latency alone), and paces a
        /// destination that refuses for load at the rate it accepts (`ConcurrencyLimit`).
        public var concurrencyLimit = ConcurrencyLimit.adaptive
        /// The limit for one whole request, enforced on every request by every transport.
        /// The default is 30 seconds.
        public var requestTimeout: Duration = .seconds(30)
        /// The largest body `send` accepts, in bytes. The default is 1 MiB.
        public var maximumMessageBytes = 1 << 20
        /// The most disk the log may use, in bytes; `send` throws `.storageFull` beyond it
        /// (older messages are never dropped to make room). The default is 256 MiB.
        public var maximumStorageBytes = 256 << 20
        /// The most messages that may be pending at once, or nil (the default): no bound but
        /// `maximumStorageBytes`. At the bound, a send throws `.storageFull` and writes nothing,
        /// unless a message with a `.dropOldest` tag (`whenFull`) is pending: then the oldest
        /// such message is dropped to make room.
        public var maximumPendingMessages: Int?
        /// Per tag, whether its oldest pending message may be dropped to make room for any send
        /// when `maximumPendingMessages` are pending. A message without a `.dropOldest` tag is never
        /// dropped, nor one with a `.refuse` tag. The default is empty: no message is dropped.
        ///
        ///     configuration.maximumPendingMessages = 1_000
        ///     configuration.whenFull["analytics"] = .dropOldest   // the newest events matter most
        public var whenFull: [String: WhenFull] = [:]
        /// The default is `.unordered`.
        public var deliveryOrder = DeliveryOrder.unordered
        /// What a power loss can lose (a killed app never loses a sent message, whatever this
        /// says). The default is `.interval(.milliseconds(100))`. `.always` makes every state
        /// change durable before anyone sees it: `send` and `cancel` return after their fsync,
        /// an outcome is synced before its events, callbacks and `delivered(id)`, and before the
        /// message's next attempt (the article "Durability and what each setting promises"
        /// says it record by record).
        public var durability: Durability = .interval(.milliseconds(100))
        /// Backoff per destination: after `failuresBeforeDown` failing attempts in a row, a
        /// destination's messages wait while one probe at a time checks it (see
        /// `DestinationBackoff`). The default is `DestinationBackoff()`: on, 5 failures.
        /// `.disabled` turns it off.
        public var destinationBackoff = DestinationBackoff()
        /// How many retries each destination may get over time (`RetryBudget`): a token per retry
        /// or probe, 100 at most, 2 more per 2xx and 1 per second; a retry without one waits for
        /// it. The default is `RetryBudget()`; `.disabled` charges nothing.
        public var retryBudget = RetryBudget()
        /// Called before every attempt with the request about to go out, to add what must be
        /// fresh or must never touch the disk (an access token):
        ///
        ///     configuration.prepareRequest = { request in
        ///         request.headers["Authorization"] = "Bearer \(try await tokens.current())"
        ///     }
        ///
        /// What it sets is never written to the log: the log keeps the message as `send`
        /// stored it. A throw counts as a failed attempt (`TransportFailure.Kind
        /// .requestPreparation`, logged with the error's type name only, never its contents)
        /// and is retried under `retry`; it says nothing about the destination's health.
        /// It runs on the delivery task, concurrently for concurrent attempts. The default is nil.
        public var prepareRequest: (@Sendable (inout DeliveryRequest) async throws -> Void)?
        /// Where Courier logs (swift-log). The default logs nothing, as a library should; pass
        /// your app's logger to see, with metadata `courier.message-id`, `courier.attempt` and
        /// `courier.destination`:
        /// - `error`: storage failures (a state change not written, a record unreadable);
        /// - `warning`: damage found when opening, a destination down, a message abandoned;
        /// - `info`: a destination recovered;
        /// - `debug`: each attempt and how it ended.
        ///
        /// Never logged: bodies and headers (they may hold personal data or secrets), nor
        /// anything `prepareRequest` adds.
        public var logger = Logger(label: "courier", factory: { _ in SwiftLogNoOpLogHandler() })
        /// The HTTP stack. The default (nil) is URLSession on Apple platforms and
        /// AsyncHTTPClient on Linux, where it needs the package trait `AsyncHTTPClientTransport`:
        /// without it, opening a courier with nil here throws `.transportUnavailable`.
        public var transport: (any DeliveryTransport)?
        /// The clock the engine sleeps on between attempts. The default is `ContinuousClock()`;
        /// tests pass a manual clock and advance it.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// The wall time when the courier opens; due times on disk are wall times, so they
        /// survive restarts. Later wall times are this plus `clock`'s elapsed time.
        /// The default is `Date()`.
        @_spi(CourierTesting) public var now: @Sendable () -> Date = { Date() }
        /// The random source for jitter. The default is the system's generator.
        @_spi(CourierTesting) public var random: @Sendable () -> UInt64 = { UInt64.random(in: .min ... .max) }
        /// How message ids are made. The default is a random UUID.
        @_spi(CourierTesting) public var makeMessageID: @Sendable () -> MessageID = { MessageID() }
        /// Where the log's bytes go. The default is the real file system; tests inject
        /// `SimulatedFileSystem` to crash, fill the disk or fail fsync. `now`, `random`,
        /// `makeMessageID` and `fileSystem` are test seams an app never sets: they are SPI
        /// (`@_spi(CourierTesting) import CourierKit`), out of an app's completions and docs.
        @_spi(CourierTesting) public var fileSystem: any LogFileSystem = PosixFileSystem()
        /// Size of a log segment. The default is 8 MiB (see ARCHITECTURE.md).
        public var segmentSizeBytes = 8 << 20
        /// Compact once at least this many messages have been resolved since the last
        /// compaction and resolved records dominate the sealed segments. The default is 10,000.
        public var compactionThreshold = 10_000
        /// Whether the compactor runs. Turn it off to keep every record for inspection with
        /// `wal-dump` (disk use then grows without bound). The default is true.
        public var isCompactionEnabled = true
        /// Whether the default transport may use a cellular network. The default is true.
        /// Applies to URLSession (Apple platforms); AsyncHTTPClient (Linux) has no such notion.
        public var allowsCellularAccess = true
        /// Whether the default transport may use a network the system marks expensive
        /// (cellular, personal hotspot). The default is true. URLSession on Apple platforms only.
        public var allowsExpensiveNetworkAccess = true
        /// Whether the default transport may send in Low Data Mode. The default is true.
        /// URLSession on Apple platforms only.
        public var allowsConstrainedNetworkAccess = true
        /// How many resolved ids `delivered(_:)` remembers (most recent first). Older ids throw
        /// `.unknownMessage`. The default is 100,000 (about 3 MB).
        public var resolvedMemoryCount = 100_000
        /// Per destination, how Courier talks to it (`DestinationOptions`: batching, gzip), keyed by its
        /// origin, `scheme://host:port` (`"https://api.example.com"`: a default port may be left
        /// out; case does not matter). A destination not listed gets `DestinationOptions()`. The
        /// default is empty.
        public var destinations: [String: DestinationOptions] = [:]
        /// The headers of a delivered message's answer that Courier keeps beside its status and its
        /// body's first 16 KiB (`ServerAnswer`, from `delivered(_:)`), by name (case does not
        /// matter), such as `["Location"]`. The default is empty: no header.
        public var answerHeaders: Set<String> = []
        /// The body of a batch (`Batching`) when the server wants another shape than the default,
        /// `[{"key": "<id>", "body": <JSON>}, …]`: given each message's key (its id, what a lone
        /// POST sends as `Idempotency-Key`) and body, in order, the bytes to POST (still as
        /// `application/json`; gzip, if on, applies after). Called once per attempt, on the
        /// delivery task: it must give the same bytes for the same messages. The default, nil:
        /// the array.
        public var batchBody: Courier.BatchBody?
        /// How a batch's messages each went (`Batching`), read from the server's 2xx answer to
        /// the batch: given that answer (every header, the body's first MiB) and the batch's
        /// messages in body order, the status each message got, by message. A 2xx delivers it;
        /// any other status is that message's failed attempt, which `retry` judges (a 400 under
        /// `.giveUpOnClientErrors` abandons it, a 500 is retried, alone or in a later batch). A
        /// message left out of the result takes the request's status. The default, nil (or nil
        /// returned, an answer it cannot read): the 2xx delivers every message. (UsingCourier,
        /// "Batching", has one for a server answering `{"<id>": 201, …}`.)
        public var batchItemStatuses:
            (@Sendable (_ answer: ServerAnswer, _ messages: [MessageID]) -> [MessageID: Int]?)?
        /// Delivery that goes on while the app is suspended: pending messages are handed to a
        /// background upload session (on iOS, `URLSessionBackgroundUploads`). The default is
        /// nil: Courier delivers only while the app runs.
        public var backgroundUploads: BackgroundUploads?

        /// A folder that app extensions send to with `ExtensionOutbox` (in the App Group container
        /// shared with them), or nil (the default): this courier collects their messages, each
        /// exactly once and with the id its extension's `send` returned, and delivers them like
        /// its own. Keep the courier's own directory in the app's container, not the group's:
        /// see the DocC article "Sending from app extensions".
        public var extensionOutboxDirectory: URL?

        /// Lets the courier open in a directory the system empties (tmp, Caches; see the
        /// table in "Where the log lives" of <doc:UsingCourier>), where pending messages are
        /// lost when it does. The default, false, makes `init` throw `.unsuitableDirectory`
        /// there. For tests, benchmarks and scratch tools only.
        public var allowsPurgeableDirectory = false

        /// The data protection class of the log's files on iOS-family platforms (`FileProtection`:
        /// it overrides the app's Data Protection entitlement for the outbox, and is set before
        /// the first file is made). The default is `.completeUntilFirstUserAuthentication`: from
        /// the first unlock after a restart on, what background delivery needs; `.complete`
        /// keeps the outbox unreadable while the device is locked, and then nothing is sent or
        /// delivered in that time.
        public var fileProtection = FileProtection.completeUntilFirstUserAuthentication

        /// Sets the protection class of one item (tests record which paths get which class).
        var setFileProtection: @Sendable (String, FileProtection) -> Void = Courier.setPlatformProtection

        /// What keeps the process from being suspended while it claims an extension's file.
        var suspensionGuard = SuspensionGuard.platform

        /// Whether the platform's data protection may keep the log's files locked (iOS-family
        /// platforms, before the first unlock since a restart): then a refused open is
        /// `.protectedDataUnavailable`. Internal: tests turn it on elsewhere.
        var hasDataProtection = Courier.platformHasDataProtection

        /// The events an `events()` or `pendingMessagesAndEvents()` stream keeps for a reader that
        /// falls behind (tests make it small, to see a model read the state again after a gap).
        var eventBufferCapacity = 10_000

        /// Every setting at its documented default.
        public init() {}
    }
}

extension Courier.Configuration {
    /// Bytes a message's URL and extra headers may take beside a body of `maximumMessageBytes`
    /// in the check `init` makes: a body of the maximum size with a URL and headers this small
    /// always fits one record. `send` checks the real encoded size and throws
    /// `.messageTooLarge` for a message whose URL and headers make it too big for a segment.
    static let envelopeAllowanceBytes = 512

    /// The log settings these Courier settings make.
    func logConfiguration() -> WriteAheadLog.Configuration {
        var log = WriteAheadLog.Configuration()
        log.segmentSizeBytes = segmentSizeBytes
        // Appends run under the core's lock, where nothing may wait for the disk: the next
        // segment is prepared, and a sealed one synced, on the log's own queue.
        log.segmentPreparation = .background
        // `.always` is applied by Courier itself, outside its lock: every record is synced
        // before it is seen (`CourierCore.write`, compaction's own sync), so
        // concurrent callers share fsyncs. The log appends with `.never` then, and never syncs on
        // a timer (a backstop would also hide, in the power-loss tests, a record that was not synced).
        log.syncPolicy = .never
        if case .interval(let interval) = durability { log.syncPolicy = .interval(interval) }
        return log
    }

    /// Every conflict in these settings, in words that name the settings; empty when valid.
    /// `Courier.init` throws `.invalidConfiguration` with the first one.
    public var problems: [String] {
        var problems: [String] = []
        func require(_ condition: Bool, _ problem: @autoclosure () -> String) {
            if !condition { problems.append(problem()) }
        }
        let log = logConfiguration()
        if let problem = log.problem { problems.append(problem) }
        if let uploads = backgroundUploads {
            require(
                uploads.maximumOutstandingTasks >= 1 && uploads.maximumOutstandingTasks <= 10_000,
                "backgroundUploads.maximumOutstandingTasks is \(uploads.maximumOutstandingTasks); it must be from 1 to "
                    + "10000"
            )
            require(
                fileProtection != .complete && fileProtection != .completeUnlessOpen,
                "fileProtection .\(fileProtection) with backgroundUploads: the system's upload daemon reads each "
                    + "handed-off body file while the device may be locked, and a file of that class cannot be read "
                    + "then (the upload fails, and is retried until the device is unlocked); use "
                    + ".completeUntilFirstUserAuthentication (the default), or no background uploads"
            )
        }
        require(
            maximumConcurrentDeliveries >= 1 && maximumConcurrentDeliveries <= 1_000,
            "maximumConcurrentDeliveries is \(maximumConcurrentDeliveries); it must be from 1 to 1000")
        let limit = concurrencyLimit
        require(
            limit.initialLimit >= 1 && limit.minimumLimit >= 1,
            "concurrencyLimit's initialLimit (\(limit.initialLimit)) and minimumLimit "
                + "(\(limit.minimumLimit)) must be at least 1")
        require(
            limit.backoffRatio > 0 && limit.backoffRatio < 1,
            "concurrencyLimit.backoffRatio is \(limit.backoffRatio); it must be between 0 and 1")
        require(requestTimeout > .zero, "requestTimeout must be positive (it is \(requestTimeout))")
        require(maximumMessageBytes >= 0, "maximumMessageBytes must not be negative")
        if log.problem == nil {
            let largest = log.maximumRecordBytes - Event.stateOverheadBytes - Self.envelopeAllowanceBytes
            require(
                maximumMessageBytes <= largest,
                "maximumMessageBytes (\(maximumMessageBytes)) does not fit segmentSizeBytes (\(segmentSizeBytes)): a "
                    + "segment of that size holds messages of at most \(max(0, largest)) bytes; raise segmentSizeBytes "
                    + "or lower maximumMessageBytes"
            )
        }
        require(
            maximumStorageBytes >= 2 * segmentSizeBytes,
            "maximumStorageBytes (\(maximumStorageBytes)) must be at least twice segmentSizeBytes "
                + "(\(segmentSizeBytes)): compaction frees space a whole sealed segment at a time"
        )
        require(compactionThreshold >= 1, "compactionThreshold must be at least 1")
        require(maximumPendingMessages.map { $0 >= 1 } ?? true, "maximumPendingMessages must be at least 1 (or nil)")
        for key in destinations.keys.sorted() where !Self.isOrigin(key) {
            problems.append("destinations key \"\(key)\" is not an origin: scheme://host:port, http or https")
        }
        let origins = Dictionary(grouping: destinations.keys) { OriginTable.origin(of: $0) }
        for (origin, keys) in origins.sorted(by: { $0.key < $1.key }) where keys.count > 1 {
            problems.append("destinations keys \(keys.sorted()) all name \(origin): give one")
        }
        for (key, batching) in destinations.compactMap({ k, v in v.batching.map { (k, $0) } }).sorted(by: {
            $0.0 < $1.0
        }) {
            require(
                batching.maximumCount >= 1 && batching.maximumBytes >= 1 && batching.maximumDelay >= .zero,
                "destinations[\"\(key)\"].batching: maximumCount and maximumBytes must be at least 1, maximumDelay "
                    + "not negative")
        }
        require(resolvedMemoryCount >= 0, "resolvedMemoryCount must not be negative")
        require(retry.initialDelay >= .zero, "retry.initialDelay must not be negative")
        require(retry.maximumDelay >= .zero, "retry.maximumDelay must not be negative")
        require(
            retry.multiplier.isFinite && retry.multiplier >= 1,
            "retry.multiplier must be a finite number of at least 1 (it is \(retry.multiplier))")
        require(retry.maximumAttempts.map { $0 >= 1 } ?? true, "retry.maximumAttempts must be at least 1 (or nil)")
        require(retry.expiry.map { $0 > .zero } ?? true, "retry.expiry must be positive (or nil)")
        require(retry.retryAfterLimit >= .zero, "retry.retryAfterLimit must not be negative")
        let explained = retry.explainedFailures
        require(explained.chance > 0 && explained.chance < 1, "retry.explainedFailures.chance must be in (0, 1)")
        require(explained.window >= 1 && explained.window <= 4096, "retry.explainedFailures.window must be 1...4096")
        require(explained.windowDuration > .zero, "retry.explainedFailures.windowDuration must be positive")
        require(explained.minimumAnswers >= 1, "retry.explainedFailures.minimumAnswers must be at least 1")
        let budget = retryBudget
        if budget.isEnabled {
            require(budget.capacity >= 1 && budget.capacity.isFinite, "retryBudget.capacity must be at least 1")
            require(
                budget.tokensPerSuccess >= 0 && budget.tokensPerSuccess.isFinite,
                "retryBudget.tokensPerSuccess must not be negative")
            require(
                budget.tokensPerSecond > 0 && budget.tokensPerSecond.isFinite,
                "retryBudget.tokensPerSecond must be positive (or the budget .disabled)")
        }
        require(destinationBackoff.failuresBeforeDown >= 1, "destinationBackoff.failuresBeforeDown must be at least 1")
        require(
            destinationBackoff.maximumProbeDelay > .zero,
            "destinationBackoff.maximumProbeDelay must be positive (it is \(destinationBackoff.maximumProbeDelay))")
        return problems
    }

    /// What the core enforces of this configuration.
    var coreLimits: CourierCore.Limits {
        let uploads = backgroundUploads
        return CourierCore.Limits(
            maximumStorageBytes: maximumStorageBytes, segmentSizeBytes: segmentSizeBytes,
            maximumPendingMessages: maximumPendingMessages ?? .max,
            droppableTags: Set(whenFull.filter { $0.value == .dropOldest }.keys),
            protectedTags: Set(whenFull.filter { $0.value == .refuse }.keys),
            compactionThreshold: compactionThreshold,
            scheduler: Scheduler.Limits(
                maximumConcurrentDeliveries: maximumConcurrentDeliveries,
                maximumHandOffs: uploads?.maximumOutstandingTasks ?? 0,
                isExcludedFromHandOff: { uploads?.isExcluded($0) ?? true }),
            compacts: isCompactionEnabled, syncsEachRecord: durability == .always)
    }
}

#if canImport(Observation)
import Foundation
import Observation

/// A courier's messages, for a screen: each message's status (queued, sending, handed to iOS,
/// waiting until a date after a failure, delivered, abandoned, cancelled), its attempts, each
/// destination's state and the counts, kept up to date on the main actor (Observation; iOS
/// 17+, macOS 14+; `CourierObservableObject` is the same for iOS 16).
///
///     @State private var model = CourierModel()   // one for the app: see README
///     List(model.messages) { message in Text("\(message)") }   // "delivered after 2 attempts"
///     Button("Send") { _ = try? model.send(["text": "hi"], to: url) }
///     .task { await model.open(directory: .applicationSupportDirectory.appending(path: "outbox")) }
///
/// Make it where the app starts and open it there (or make it with `init(courier:)` for a
/// courier already open): views and the app delegate then share one model, and so one courier.
/// It starts from the messages pending (those of earlier runs included) and follows every event
/// from that instant on. A reader that falls more than 10,000 events behind does not go stale:
/// it reads the state again (`missedEventCount` says it happened). Resolved messages stay
/// listed, the newest `keepingResolved` of them. It stops following when the courier closes or
/// the model is released.
///
/// **An event costs O(1) on the main actor, and tells only the views that read what it
/// changed**: a view that reads `status(of:)` for one message redraws when that message
/// changes; one that reads `ids` when messages join or leave the list; one that reads
/// `messages`, on every change. For a long list, show `ids` and let each row read its own
/// message. Bodies are not kept unless asked (`keepingBodies`).
@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
@MainActor @Observable
public final class CourierModel: FollowingModel {
    /// The courier it follows; nil until `open` succeeded.
    public internal(set) var courier: Courier?
    /// Why the last `open` failed, if it did (nil once open).
    public internal(set) var openError: CourierError?
    /// Messages not yet delivered, abandoned or cancelled.
    public private(set) var pendingCount = 0
    /// Pending messages handed to iOS's background upload session.
    public private(set) var handedOffCount = 0
    /// Destinations reported down, or back up since.
    public private(set) var destinations: [DestinationStatus] = []
    /// Events this model fell too far behind to read, over its life (after each gap it read the
    /// state again: `messages` is right; this says that it happened).
    public private(set) var missedEventCount = 0
    /// The last storage trouble reported (disk full, I/O error, damage found at open), if any.
    public private(set) var storageProblem: CourierError?
    /// Changed when messages join or leave the list (`ids` reads it).
    private var membership = 0
    /// Changed with every message (`messages` reads it).
    private var contents = 0
    @ObservationIgnored private(set) var board: MessageBoard
    /// One token per message a view read (`status(of:)`): a change to that message changes it.
    @ObservationIgnored private var watched: [MessageID: MessageWatch] = [:]
    @ObservationIgnored var opening: Task<Void, Never>?
    @ObservationIgnored let follower = FollowerTask()

    /// A model with no courier yet: make one where the app starts, give it to the views, then
    /// `open` it. Lists the newest `keepingResolved` resolved messages (100 by default); keeps
    /// each message's body (`MessageStatus.body`) only if `keepingBodies`.
    public init(keepingResolved: Int = 100, keepingBodies: Bool = false) {
        board = MessageBoard(keepsResolved: keepingResolved, keepsBodies: keepingBodies)
    }

    /// Follows `courier`, already open.
    public convenience init(courier: Courier, keepingResolved: Int = 100, keepingBodies: Bool = false) {
        self.init(keepingResolved: keepingResolved, keepingBodies: keepingBodies)
        follow(courier)
    }

    /// Whether `open` succeeded (or it was made with a courier).
    public var isOpen: Bool { courier != nil }
    /// Listed messages' ids, oldest first: changes only when messages join or leave.
    public var ids: [MessageID] {
        _ = membership
        return board.ids
    }
    /// Pending messages and the newest resolved ones, oldest first: changes with every message.
    public var messages: [MessageStatus] {
        _ = contents
        return board.messages
    }

    /// The status of message `id`, if it is listed. A view that reads it redraws when that
    /// message changes (or, for an id not listed, when the list does).
    public func status(of id: MessageID) -> MessageStatus? {
        guard let status = board.status(of: id) else {
            _ = membership
            return nil
        }
        let watch = watched[id] ?? MessageWatch()
        watched[id] = watch
        _ = watch.version
        return status
    }

    /// Opens the outbox in `directory` (`Courier.open(directory:configuration:)`, off the main
    /// thread) and follows it. Once open, or while opening, it does nothing, so `.task` may call
    /// it on every appearance. A failure is kept in `openError`; call again to retry.
    public func open(directory: URL, configuration: Courier.Configuration = Courier.Configuration()) async {
        await open(with: { () async throws(CourierError) in
            try await Courier.open(directory: directory, configuration: configuration)
        })
    }

    /// Sends `json` as `Courier.send` does, and lists the message at once, with its URL (a
    /// message sent straight through the courier is listed too, from its event). Throws
    /// `.closed` before `open` succeeded.
    @discardableResult
    public func send(
        _ json: [String: Any], to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = [], replacing: String? = nil, expiry: Duration? = nil
    ) throws(CourierError) -> MessageID {
        try sendListing(
            json, to: url, orderingKey: orderingKey, headers: headers, tags: tags, replacing: replacing, expiry: expiry)
    }

    func change(_ body: (inout MessageBoard) -> MessageBoard.Change) {
        let change = body(&board)
        if change.membership { membership &+= 1 }
        if change.everything || !change.messages.isEmpty { contents &+= 1 }
        for id in change.everything ? Array(watched.keys) : change.messages {
            guard let watch = watched[id] else { continue }
            watch.version &+= 1
            if board.status(of: id) == nil { watched[id] = nil }
        }
        // The counts, destinations, missed events and storage problem: set only when changed (Swift
        // 6.2's macro skips equal values, but Xcode 16's does not), so their readers hear of nothing else.
        if pendingCount != board.pendingCount { pendingCount = board.pendingCount }
        if handedOffCount != board.handedOffCount { handedOffCount = board.handedOffCount }
        if destinations != board.destinations { destinations = board.destinations }
        if missedEventCount != board.missedEventCount { missedEventCount = board.missedEventCount }
        if storageProblem != board.storageProblem { storageProblem = board.storageProblem }
    }
}

/// What a view reading one message observes: changed with that message only.
@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
@MainActor @Observable
final class MessageWatch {
    var version = 0
}
#endif

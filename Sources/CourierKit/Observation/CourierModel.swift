#if canImport(Observation)
import Foundation
import Observation

/// A courier's messages, for a screen: each message's status (queued, sending, handed to iOS,
/// waiting until a date after a failure, delivered, abandoned, cancelled), its attempts, each
/// destination's state and the pending count, kept up to date on the main actor. SwiftUI
/// views that read it redraw when what they read changes (Observation; iOS 17+, macOS 14+;
/// `CourierObservableObject` is the same for iOS 16).
///
///     @State private var model: CourierModel?  // made once, in `.task` (see README)
///     List(model?.messages ?? []) { message in Text("\(message.state)") }
///     Button("Send") { _ = try? model?.send(["text": "hi"], to: url) }
///
/// It starts from the messages pending now (those of earlier runs included) and follows every
/// event from that instant on. A reader that falls more than 10,000 events behind does not go
/// stale: it reads the state again (`missedEventCount` says it happened). Resolved messages
/// stay listed, the newest `keepingResolved` of them. It stops following when the courier
/// closes or the model is released.
@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
@MainActor
public final class CourierModel: Observable {
    /// The courier it follows.
    public let courier: Courier
    private let follower = FollowerTask()
    // The `@Observable` macro's expansion, written out: one observed property, the board, which
    // every public property reads, changed in place (`_modify`, so a change to one message
    // copies no array). Written out because the macro's plugin comes with the compiler and
    // its expansion must agree with the SDK's declaration of the macro: on Linux, `make
    // ios-check` pairs a newer compiler with the iOS 17.4 SDK, and they do not.
    private let registrar = ObservationRegistrar()
    private var storedBoard: MessageBoard
    private var board: MessageBoard {
        get {
            registrar.access(self, keyPath: \.board)
            return storedBoard
        }
        _modify {
            registrar.willSet(self, keyPath: \.board)
            defer { registrar.didSet(self, keyPath: \.board) }
            yield &storedBoard
        }
    }

    /// Follows `courier`, keeping the newest `keepingResolved` resolved messages listed (100
    /// by default).
    public convenience init(courier: Courier, keepingResolved: Int = 100) {
        self.init(courier: courier, keepingResolved: keepingResolved, bufferCapacity: 10_000)
    }

    /// `init(courier:keepingResolved:)` with a smaller event buffer (tests).
    init(courier: Courier, keepingResolved: Int, bufferCapacity: Int) {
        self.courier = courier
        storedBoard = MessageBoard(keepsResolved: max(0, keepingResolved))
        follower.set(
            ModelFollower.follow(courier, bufferCapacity: bufferCapacity) { [weak self] update in
                self?.board.apply(update) != nil  // false once the model is gone
            })
    }

    /// Pending messages and the newest resolved ones, oldest first.
    public var messages: [MessageStatus] { board.messages }
    /// Messages not yet delivered, abandoned or cancelled.
    public var pendingCount: Int { board.pendingCount }
    /// Destinations reported down, or back up since.
    public var destinations: [DestinationStatus] { board.destinations }
    /// Events this model fell too far behind to read, over its life (after each gap it read the
    /// state again: `messages` is right; this says that it happened).
    public var missedEventCount: Int { board.missedEventCount }
    /// The last storage trouble reported (disk full, I/O error, damage found at open), if any.
    public var storageProblem: CourierError? { board.storageProblem }

    /// Whether it has read the courier's state once (tests: what happens after it is seen).
    var hasLoadedForTesting: Bool { board.hasLoaded }

    /// The status of message `id`, if it is listed.
    public func status(of id: MessageID) -> MessageStatus? { board.status(of: id) }

    /// Sends `json` as `Courier.send` does, and lists the message at once, with its URL and
    /// body (a message sent straight through the courier is listed too, from its event).
    @discardableResult
    public func send(
        _ json: [String: Any], to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = []
    ) throws(CourierError) -> MessageID {
        try board.send(json, to: url, orderingKey: orderingKey, headers: headers, tags: tags, through: courier)
    }
}
#endif

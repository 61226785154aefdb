#if canImport(Combine)
import Combine
import Foundation

// Apple platforms only (Combine): type-checked for iOS by `make ios-check`, never run here. It
// is `CourierModel` for iOS 16, as an `ObservableObject`: the same board (`MessageBoard`) and
// the same following and opening (`FollowingModel`), both tested on Linux through
// `CourierModel`; only the publishing differs: `objectWillChange` before every change, on the
// main actor, as SwiftUI requires (so a view redraws on any change, not only its message's).

/// `CourierModel` for iOS 16 and SwiftUI's `@StateObject` / `@ObservedObject` (see there).
@MainActor
public final class CourierObservableObject: ObservableObject, FollowingModel {
    /// The courier it follows; nil until `open` succeeded.
    @Published public internal(set) var courier: Courier?
    /// Why the last `open` failed, if it did (nil once open).
    @Published public internal(set) var openError: CourierError?
    private var board: MessageBoard
    var opening: Task<Void, Never>?
    let follower = FollowerTask()

    /// A model with no courier yet (see `CourierModel.init(keepingResolved:keepingBodies:)`).
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
    /// Listed messages' ids, oldest first.
    public var ids: [MessageID] { board.ids }
    /// Pending messages and the newest resolved ones, oldest first.
    public var messages: [MessageStatus] { board.messages }
    /// Messages not yet delivered, abandoned or cancelled.
    public var pendingCount: Int { board.pendingCount }
    /// Pending messages handed to iOS's background upload session.
    public var handedOffCount: Int { board.handedOffCount }
    /// Destinations reported down, or back up since.
    public var destinations: [DestinationStatus] { board.destinations }
    /// Events this model fell too far behind to read (it read the state again after each gap).
    public var missedEventCount: Int { board.missedEventCount }
    /// The last storage trouble reported, if any.
    public var storageProblem: CourierError? { board.storageProblem }

    /// The status of message `id`, if it is listed.
    public func status(of id: MessageID) -> MessageStatus? { board.status(of: id) }

    /// Opens the outbox in `directory` and follows it (see `CourierModel.open`).
    public func open(directory: URL, configuration: Courier.Configuration = Courier.Configuration()) async {
        await open(with: { () async throws(CourierError) in
            try await Courier.open(directory: directory, configuration: configuration)
        })
    }

    /// Sends `json` as `Courier.send` does, and lists the message at once.
    @discardableResult
    public func send(
        _ json: [String: Any], to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = [], replacing: String? = nil, expiry: Duration? = nil
    ) throws(CourierError) -> MessageID {
        try sendListing(
            json, to: url, orderingKey: orderingKey, headers: headers, tags: tags, replacing: replacing, expiry: expiry)
    }

    func change(_ body: (inout MessageBoard) -> MessageBoard.Change) {
        objectWillChange.send()
        _ = body(&board)
    }
}
#endif

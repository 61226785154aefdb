#if canImport(Combine)
import Combine
import Foundation

// Apple platforms only (Combine): type-checked for iOS by `make ios-check`, never run here. It
// is `CourierModel` for iOS 16, as an `ObservableObject`: the same board (`MessageBoard`) and
// the same follower (`ModelFollower`), both tested on Linux through `CourierModel`; only the
// publishing differs (`@Published`, changed on the main actor, as SwiftUI requires).

/// `CourierModel` for iOS 16 and SwiftUI's `@StateObject` / `@ObservedObject` (see there).
@MainActor
public final class CourierObservableObject: ObservableObject {
    /// The courier it follows.
    public let courier: Courier
    @Published private var board: MessageBoard
    private let follower = FollowerTask()

    /// Follows `courier`, keeping the newest `keepingResolved` resolved messages listed (100
    /// by default).
    public init(courier: Courier, keepingResolved: Int = 100) {
        self.courier = courier
        board = MessageBoard(keepsResolved: max(0, keepingResolved))
        follower.set(
            ModelFollower.follow(courier, bufferCapacity: 10_000) { [weak self] update in
                self?.board.apply(update) != nil  // false once the model is gone
            })
    }

    /// Pending messages and the newest resolved ones, oldest first.
    public var messages: [MessageStatus] { board.messages }
    /// Messages not yet delivered, abandoned or cancelled.
    public var pendingCount: Int { board.pendingCount }
    /// Destinations reported down, or back up since.
    public var destinations: [DestinationStatus] { board.destinations }
    /// Events this model fell too far behind to read (it read the state again after each gap).
    public var missedEventCount: Int { board.missedEventCount }
    /// The last storage trouble reported, if any.
    public var storageProblem: CourierError? { board.storageProblem }

    /// The status of message `id`, if it is listed.
    public func status(of id: MessageID) -> MessageStatus? { board.status(of: id) }

    /// Sends `json` as `Courier.send` does, and lists the message at once.
    @discardableResult
    public func send(
        _ json: [String: Any], to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = []
    ) throws(CourierError) -> MessageID {
        try board.send(json, to: url, orderingKey: orderingKey, headers: headers, tags: tags, through: courier)
    }
}
#endif

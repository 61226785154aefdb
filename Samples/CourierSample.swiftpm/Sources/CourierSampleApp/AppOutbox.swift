import CourierKit
import Foundation

/// Opens the app's one Courier, off the main thread, and makes the screen's model for it.
@MainActor
final class AppOutbox: ObservableObject {
    enum Phase {
        case opening
        case open(CourierModel)
        case failed(String)
    }

    @Published private(set) var phase = Phase.opening
    /// The courier, kept for the app's lifetime: a released courier stops delivering.
    private(set) var courier: Courier?
    private var opening = false
    /// The server the user last applied; the challenge's until then.
    private static let serverKey = "courier-sample.server"
    /// The first user's server (it answers 200 or 500 at random): where the sample sends until
    /// the user types another (Samples/README.md: the repository's flaky server on your Mac).
    static let challengeServer = URL(string: "https://challenge.ronash.co/reliable-messaging")!

    /// Where new messages go: the server the user last applied, or the challenge's.
    var server: URL {
        UserDefaults.standard.string(forKey: Self.serverKey).flatMap(URL.init(string:)) ?? Self.challengeServer
    }

    /// Remembers a server the user applied.
    func remember(_ server: URL) { UserDefaults.standard.set(server.absoluteString, forKey: Self.serverKey) }
    /// Made when the app delegate is (before launch ends): it names Courier's background
    /// session, so that `URLSessionBackgroundUploads.handleEvents` recognizes its identifier
    /// in a launch that iOS made to report uploads.
    let configuration: Courier.Configuration = {
        var configuration = Courier.Configuration()
        // Delivery goes on while the app is suspended: pending messages are handed to a
        // background URLSession when the app leaves the screen.
        configuration.backgroundUploads = .urlSession(identifier: AppDelegate.backgroundUploadsIdentifier)
        return configuration
    }()

    /// At launch (and again from the screen after a failure): replays the log (every message an
    /// earlier run left pending comes back), turns on the lifecycle integration (a background
    /// task waiting for the courier gets it now), and makes the screen's model (`CourierModel`: it lists what is pending and follows it). Launched in the
    /// background before the device was first unlocked, it waits for the unlock, then opens.
    func open() async {
        guard !opening, courier == nil else { return }
        opening = true
        defer { opening = false }
        phase = .opening
        do {
            let directory = try FileManager.default.url(for: .applicationSupportDirectory, in: .userDomainMask,
                                                        appropriateFor: nil, create: true)
                .appendingPathComponent("courier-outbox", isDirectory: true)
            let courier = try await Courier.open(directory: directory, configuration: configuration, lifecycle: .automatic)
            self.courier = courier
            phase = .open(CourierModel(courier: courier))
        } catch {
            phase = .failed(error.localizedDescription)
        }
    }
}

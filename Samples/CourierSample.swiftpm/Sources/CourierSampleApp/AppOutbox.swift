import Courier
import CourierSample
import Foundation

/// Opens the app's one Courier, off the main thread, and makes the screen's model for it.
@MainActor
final class AppOutbox: ObservableObject {
    enum Phase {
        case opening
        case open(SampleModel)
        case failed(String)
    }

    @Published private(set) var phase = Phase.opening
    private var started = false
    /// The server the user last applied; the challenge's until then.
    private static let serverKey = "courier-sample.server"

    /// Once, at launch: replays the log (every message an earlier run left pending comes back),
    /// turns on the lifecycle integration (a background task waiting for the courier gets it
    /// now), and makes the screen's model.
    func open() async {
        guard !started else { return }
        started = true
        do {
            let directory = try FileManager.default.url(for: .applicationSupportDirectory, in: .userDomainMask,
                                                        appropriateFor: nil, create: true)
                .appendingPathComponent("courier-outbox", isDirectory: true)
            var configuration = Courier.Configuration()
            // Delivery goes on while the app is suspended: pending messages are handed to a
            // background URLSession when the app leaves the screen.
            configuration.backgroundUploads = .urlSession(identifier: AppDelegate.backgroundUploadsIdentifier)
            let courier = try await Courier.open(directory: directory, configuration: configuration)
            courier.enableAppLifecycleIntegration()
            let stored = UserDefaults.standard.string(forKey: Self.serverKey).flatMap(SampleViewModel.serverURL(from:))
            let model = SampleModel(gateway: CourierGateway(courier: courier), server: stored ?? SampleViewModel.challengeServer)
            model.onServerChange = { UserDefaults.standard.set($0.absoluteString, forKey: Self.serverKey) }
            phase = .open(model)
        } catch {
            phase = .failed("\(error)")
        }
    }
}

import CourierKit
import XCTest

@testable import CourierSample

/// The parts of DEVICE-TESTS.md a simulator can run, inside the app as it launched (the test
/// bundle is hosted by it): check 1 (it builds, links, launches; the outbox opens and sends on
/// an iOS runtime) and check 8's foreground half (an extension's send is collected within 1 s).
/// `xcodebuild test`, in README; never run by this project (no Mac).
@MainActor
final class SimulatorChecks: XCTestCase {
    /// Nothing here is delivered: a closed port, and every message is cancelled at the end.
    private let nowhere = URL(string: "http://127.0.0.1:9/never")!

    /// Check 1: the launch opened the outbox in the app's own container, not the App Group's.
    func testTheOutboxOpensInTheAppsContainer() async throws {
        let model = try await openModel()
        XCTAssertNil(model.openError)
        let outbox = AppDelegate.outboxDirectory.standardizedFileURL.path
        XCTAssertTrue(outbox.hasPrefix(URL.applicationSupportDirectory.standardizedFileURL.path), outbox)
        let group = try XCTUnwrap(SharedContainer.container, "no App Group container: the entitlement is missing")
        XCTAssertFalse(outbox.hasPrefix(group.standardizedFileURL.path), "the courier's log is in the App Group")
    }

    /// Check 1: `send` stores a message the model lists at once (typed throws, the log, the C
    /// target and the resource bundle, on an iOS runtime).
    func testASentMessageIsListed() async throws {
        let model = try await openModel()
        let id = try model.send(["text": "simulator check 1"], to: nowhere)
        XCTAssertNotNil(model.status(of: id))
        try cancel(id, in: model)
    }

    /// Check 8, the app in the foreground: a send through `ExtensionOutbox` into the App Group
    /// outbox (what the share extension does) is collected within 1 s, woken by its Darwin
    /// notification, and keeps its id.
    func testAnExtensionsSendIsCollectedWithinOneSecond() async throws {
        let model = try await openModel()
        let directory = try XCTUnwrap(SharedContainer.extensionOutbox)
        let id = try ExtensionOutbox(directory: directory).send(["text": "simulator check 8"], to: nowhere)
        let start = ContinuousClock.now
        try await waitUntil(within: .seconds(1), "not collected within 1 s") { model.status(of: id) != nil }
        print("check 8: collected in \(ContinuousClock.now - start)")
        try cancel(id, in: model)
    }

    private func openModel() async throws -> CourierModel {
        let delegate = try XCTUnwrap(AppDelegate.current, "the app delegate did not launch")
        try await waitUntil(within: .seconds(10), "the outbox did not open") {
            delegate.model.isOpen || delegate.model.openError != nil
        }
        return delegate.model
    }

    private func cancel(_ id: MessageID, in model: CourierModel) throws {
        _ = try XCTUnwrap(model.courier).cancel(id)
    }

    /// Polls every 10 ms: the model changes on the main actor, which this test yields while it sleeps.
    private func waitUntil(
        within limit: Duration, _ failure: String, _ condition: () -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TimedOut(errorDescription: failure) }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// A wait that ran out: the test fails with its description.
private struct TimedOut: LocalizedError {
    let errorDescription: String?
}

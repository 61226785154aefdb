import BackgroundTasks
import CourierKit
import SwiftUI

/// The Debug tab: what DEVICE-TESTS.md asks you to read or do on the phone. Pull to refresh
/// the protection classes and the processing requests; the counts are live.
@MainActor
struct DebugScreen: View {
    let delegate: AppDelegate
    @State private var protections: [FolderProtection] = []
    @State private var pendingRequests: [String] = []
    @State private var note: String?

    private var model: CourierModel { delegate.model }

    var body: some View {
        List {
            Section {
                LabeledContent("Open", value: model.isOpen ? "yes" : "not yet")
                LabeledContent("Pending", value: "\(model.pendingCount)")
                LabeledContent("Handed off to iOS", value: "\(model.handedOffCount)")
                // Our own share sheet keeps the app running while the extension sends (check 8).
                ShareLink(item: "Shared from the Debug tab at \(Date.now.formatted(date: .omitted, time: .standard))") {
                    Text("Share a text through the extension")
                }
                Button("Collect the extension's messages now") { Task { await collect() } }
                Button("Send 10 messages") { Task { await sendMany(10) } }
                Button("Send 5,000 messages of 1 KiB") { Task { await sendMany(5_000) } }
            } header: {
                Text("Outbox (checks 2, 5, 6, 8)")
            } footer: {
                Text(note ?? "Load goes to the server of the Messages tab.")
            }
            Section("Protection classes (check 3)") {
                ForEach(protections) { LabeledContent($0.folder, value: $0.protection) }
            }
            processingSection
            #if DEBUG
            ExitTimerSection(timer: delegate.exitTimer)
            #endif
            Section("MetricKit (check 4)") {
                Text(delegate.backgroundExits.latestExits ?? "No daily report yet (one a day at most; on a phone, "
                    + "Xcode › Debug › Simulate MetricKit Payloads sends one now).")
                if let crash = delegate.backgroundExits.latestCrash { Text(crash) }
            }
        }
        .navigationTitle("Debug")
        .task { await refresh() }
        .refreshable { await refresh() }
    }

    private var processingSection: some View {
        Section {
            LabeledContent("Requested", value: pendingRequests.joined(separator: "\n"))
            #if DEBUG
            // Private BackgroundTasks calls, for Xcode's debugger on a device; only in debug builds,
            // as App Review rejects an app that names them.
            ForEach(Self.debuggerLines, id: \.self) { Text($0).font(.caption.monospaced()).textSelection(.enabled) }
            #endif
        } header: {
            Text("Processing task (check 5)")
        } footer: {
            Text("Requested when the app leaves the screen with messages pending. In Xcode's debugger on a phone: "
                + "pause after that, run the first line, continue; the second line ends the task early.")
        }
    }

    private func refresh() async {
        protections = Self.folderProtections()
        let requests = await Self.pendingTaskRequests()
        pendingRequests = requests.isEmpty ? ["none"] : requests
    }

    private func collect() async {
        guard let courier = model.courier else {
            note = "the outbox is not open"
            return
        }
        let added = await courier.collectExtensionMessages()
        note = "collected \(added) message\(added == 1 ? "" : "s") from the App Group outbox"
    }

    /// `count` messages of about 1 KiB each, from the main actor as a screen sends them; the
    /// screen draws between batches of 100.
    private func sendMany(_ count: Int) async {
        let server = SharedContainer.server
        let padding = String(repeating: "x", count: 900)
        var sent = 0
        do {
            for index in 1...count {
                try model.send(
                    ["text": "load \(index) of \(count)", "padding": padding, "sentAt": Date().ISO8601Format()],
                    to: server)
                sent += 1
                if index.isMultiple(of: 100) { await Task.yield() }
            }
            note = "sent \(sent) to \(server.absoluteString)"
        } catch {
            note = "sent \(sent), then: \(error.localizedDescription)"
        }
    }
}

/// One folder's data protection class, as `FileManager` reports it.
struct FolderProtection: Identifiable {
    let folder: String
    let protection: String
    var id: String { folder }
}

extension DebugScreen {
    #if DEBUG
    /// Apple's "Starting and Terminating Tasks During Development" (they work on devices only).
    static let debuggerLines = [
        "e -l objc -- (void)[[BGTaskScheduler sharedScheduler] "
            + "_simulateLaunchForTaskWithIdentifier:@\"\(AppDelegate.delivery)\"]",
        "e -l objc -- (void)[[BGTaskScheduler sharedScheduler] "
            + "_simulateExpirationForTaskWithIdentifier:@\"\(AppDelegate.delivery)\"]",
    ]
    #endif

    /// Application Support (F3: does the outbox's class leak onto it?), the courier's folder and
    /// the first items in it (log segments, hand-off bodies: F4), and the App Group outbox.
    static func folderProtections() -> [FolderProtection] {
        let outbox = AppDelegate.outboxDirectory
        var folders: [(String, URL?)] = [
            ("Application Support", URL.applicationSupportDirectory), ("Courier outbox", outbox),
            ("App Group outbox", SharedContainer.extensionOutbox),
        ]
        let items = (try? FileManager.default.contentsOfDirectory(at: outbox, includingPropertiesForKeys: nil)) ?? []
        for item in items.sorted(by: { $0.lastPathComponent < $1.lastPathComponent }).prefix(6) {
            folders.append(("outbox/" + item.lastPathComponent, item))
        }
        return folders.map { FolderProtection(folder: $0.0, protection: protectionClass(of: $0.1)) }
    }

    static func protectionClass(of url: URL?) -> String {
        guard let url else { return "no App Group container: check the entitlement" }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path(percentEncoded: false))
        else { return "not made yet" }
        guard let protection = attributes[.protectionKey] as? FileProtectionType else {
            return "none reported (the Simulator has no data protection)"
        }
        return protection.rawValue.replacingOccurrences(of: "NSFileProtection", with: "")
    }

    /// The scheduler's pending requests, each with its earliest start. Nonisolated: the
    /// completion handler runs on a background queue, so it must not be a main-actor closure.
    nonisolated static func pendingTaskRequests() async -> [String] {
        await withCheckedContinuation { continuation in
            BGTaskScheduler.shared.getPendingTaskRequests { requests in
                let described = requests.map { request in
                    let start = request.earliestBeginDate?.formatted(date: .omitted, time: .standard)
                    return request.identifier + (start.map { ", from " + $0 } ?? "")
                }
                continuation.resume(returning: described)
            }
        }
    }
}

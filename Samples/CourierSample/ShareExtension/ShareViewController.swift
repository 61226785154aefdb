import CourierKit
import UIKit

/// The share extension (Info.plist's NSExtensionPrincipalClass): sends what was shared, a web
/// page's URL or text, through `ExtensionOutbox` into the App Group's outbox, then completes
/// the request. It never delivers: the app collects the message, at once if it is running (the
/// send wakes it: check 8), else when it next opens or comes back. "Send 50 times" is check 4's
/// loop: sends, then completes at once, while the app may be collecting.
final class ShareViewController: UIViewController {
    private let status = UILabel()

    override func viewDidLoad() {
        super.viewDidLoad()
        view.backgroundColor = .systemBackground
        status.text = "Send what you shared to the Courier sample's server; the app delivers it."
        status.numberOfLines = 0
        status.textAlignment = .center
        let buttons = [("Send", 1), ("Send 50 times", 50)].map { title, count in
            UIButton(configuration: .filled(), primaryAction: UIAction(title: title) { [weak self] _ in
                Task { await self?.send(times: count) }
            })
        }
        let cancel = UIButton(configuration: .plain(), primaryAction: UIAction(title: "Cancel") { [weak self] _ in
            self?.extensionContext?.cancelRequest(withError: CocoaError(.userCancelled))
        })
        let stack = UIStackView(arrangedSubviews: [status] + buttons + [cancel])
        stack.axis = .vertical
        stack.spacing = 16
        stack.translatesAutoresizingMaskIntoConstraints = false
        view.addSubview(stack)
        NSLayoutConstraint.activate([
            stack.centerYAnchor.constraint(equalTo: view.centerYAnchor),
            stack.leadingAnchor.constraint(equalTo: view.layoutMarginsGuide.leadingAnchor),
            stack.trailingAnchor.constraint(equalTo: view.layoutMarginsGuide.trailingAnchor),
        ])
    }

    /// Each `send` returns with the message on stable storage, and the outbox holds no lock or
    /// open file between sends: iOS may end the extension at any moment after it.
    private func send(times: Int) async {
        let text = await sharedText() ?? "(nothing readable was shared)"
        do {
            guard let directory = SharedContainer.extensionOutbox else {
                throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "no App Group container"])
            }
            let outbox = try ExtensionOutbox(directory: directory)
            for index in 1...times {
                let body = ["text": text, "from": "share extension", "copy": "\(index) of \(times)",
                            "sentAt": Date().ISO8601Format()]
                try outbox.send(body, to: SharedContainer.server)
            }
        } catch {
            status.text = "Not sent: \(error.localizedDescription)"
            try? await Task.sleep(for: .seconds(3))  // time to read why
        }
        extensionContext?.completeRequest(returningItems: nil)
    }

    /// The first web URL or text among the shared items. The provider calls back on a queue of
    /// its own, so its handlers are `@Sendable`, never main-actor closures.
    private func sharedText() async -> String? {
        let items = extensionContext?.inputItems.compactMap { $0 as? NSExtensionItem } ?? []
        for provider in items.flatMap({ $0.attachments ?? [] }) {
            if provider.canLoadObject(ofClass: URL.self) {
                let url: URL? = await withCheckedContinuation { continuation in
                    _ = provider.loadObject(ofClass: URL.self) { @Sendable url, _ in
                        continuation.resume(returning: url)
                    }
                }
                if let url { return url.absoluteString }
            }
            if provider.canLoadObject(ofClass: String.self) {
                let text: String? = await withCheckedContinuation { continuation in
                    _ = provider.loadObject(ofClass: String.self) { @Sendable text, _ in
                        continuation.resume(returning: text)
                    }
                }
                if let text { return text }
            }
        }
        return nil
    }
}

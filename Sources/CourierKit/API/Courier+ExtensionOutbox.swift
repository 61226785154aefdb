import CourierLog
import Foundation

/// The app's side of `ExtensionOutbox`: collecting what extensions wrote into the courier's own
/// log, exactly once, then delivering it like any message sent here.
///
/// One collection: claim every extension's file (`OutboxFiles.claim`, a rename under the file's
/// lock, taken without waiting and within an expiring activity on iOS: a file an extension
/// holds is claimed a moment later), read each claimed file with the log's reader (checksums,
/// torn tail), enqueue each
/// message not known yet (pending, or remembered as resolved) with its id, key, headers and
/// tags, make the courier's log durable, and only then remove the claimed file. A crash at any
/// step leaves the claimed file, whose messages the next collection recognises by id: none is
/// collected twice under two ids; one resolved longer ago than `resolvedMemoryCount` would be
/// sent again under its same `Idempotency-Key`.
extension Courier {
    /// The extension outbox's state: collections run one at a time on their own queue. (A
    /// struct: its queue and its observer's box are shared by every copy; `init(directory:)` is
    /// the memberwise one.)
    struct ExtensionCollection: Sendable {
        let directory: URL
        let queue = DispatchQueue(label: "courier.extension-outbox", qos: .utility)
        let observer = Locked<ExtensionWake.Observer?>(nil)
    }

    /// Collects now what extensions wrote to `Configuration.extensionOutboxDirectory` (see
    /// `ExtensionOutbox`), and returns how many messages it added; 0 without a directory, or
    /// once closed. The courier also collects when it opens, in `appDidEnterForeground()`, and
    /// when an extension's `send` wakes it (Apple platforms). Reads files off the caller's
    /// thread.
    @discardableResult
    public func collectExtensionMessages() async -> Int {
        guard let collection = extensionCollection else { return 0 }
        return await onIOQueue(collection.queue) { [self] in collectNow(collection.directory) }
    }

    /// Starts a collection without waiting for it (open, foreground, an extension's wake).
    func collectExtensionMessagesSoon() {
        guard let collection = extensionCollection else { return }
        collection.queue.async { [weak self] in _ = self?.collectNow(collection.directory) }
    }

    /// At open: the first collection, and the wake from extensions.
    func startExtensionCollection() {
        guard let collection = extensionCollection else { return }
        let observer = ExtensionWake.observe(collection.directory) { [weak self] in
            self?.collectExtensionMessagesSoon()
        }
        collection.observer.withLock { $0 = observer }
        collectExtensionMessagesSoon()
    }

    /// At close: no more wakes.
    func stopExtensionCollection() {
        if let observer = extensionCollection?.observer.take() { ExtensionWake.stop(observer) }
    }

    /// One collection, on the collection queue. A claimed file whose messages could not all be
    /// stored (a full disk, a failing log, a closed courier) stays for the next one; a file an
    /// extension was appending to is claimed by another collection, a moment later.
    private func collectNow(_ directory: URL) -> Int {
        guard !core.status.isClosed else { return 0 }
        let fileSystem = configuration.fileSystem
        let refused = LogError(.io, "the system is suspending the app")
        let claims: OutboxFiles.Claims
        do throws(LogError) {
            claims = try configuration.suspensionGuard.run("Courier: collecting extension messages", refused: refused) {
                () throws(LogError) in try OutboxFiles.claim(in: directory.path, fileSystem: fileSystem)
            }
        } catch {
            configuration.logger.error("collecting the extension outbox failed: \(error)")
            return 0
        }
        // A file was busy (an extension appending): claimed by another collection in 0.2 s.
        if claims.busy > 0, let queue = extensionCollection?.queue {
            queue.asyncAfter(deadline: .now() + .milliseconds(200)) { [weak self] in _ = self?.collectNow(directory) }
        }
        var collected = 0
        for claim in claims.directories {
            guard let added = collect(claim) else { break }
            collected += added
        }
        return collected
    }

    /// The messages of one claimed file, added; nil if they could not all be stored.
    private func collect(_ claim: String) -> Int? {
        var states: [MessageState] = []
        _ = try? LogReader(directory: claim, fileSystem: configuration.fileSystem).read { record in
            // Only an `enqueued` record decodes to `.enqueued`.
            if case .enqueued(let state)? = Event.decode(kind: record.kind, body: record.body) { states.append(state) }
        }
        var added = 0
        for state in states where !core.knows(state.id) {
            do {
                try enqueueCollected(state)
                added += 1
            } catch  where [.storageFull, .storageFailed, .closed].contains(error.code) {
                configuration.logger.warning("an extension's message waits for the next collection: \(error)")
                return nil
            } catch {
                configuration.logger.error("an extension's message \(state.id) cannot be sent and is dropped: \(error)")
            }
        }
        do throws(LogError) {
            try log.sync()
            try OutboxFiles.finish(claim, fileSystem: configuration.fileSystem)
        } catch {
            configuration.logger.warning("an extension's file is kept for the next collection: \(error)")
            return nil
        }
        return added
    }

    /// Enqueues an extension's message as `send` would, keeping its id, keys, headers, tags and
    /// expiry.
    private func enqueueCollected(_ state: MessageState) throws(CourierError) {
        guard let url = URL(string: state.url) else { throw CourierError(.invalidURL, "\(state.url)") }
        var contentType = "application/json"
        var headers: [String: String] = [:]
        for header in state.headers {
            if header.name == "Content-Type" { contentType = header.value } else { headers[header.name] = header.value }
        }
        _ = try enqueue(
            body: state.body, contentType: contentType, url: url,
            labels: Labels(
                orderingKey: state.orderingKey, headers: headers, tags: Set(state.tags), replacing: state.replacing,
                expiry: state.expiryMilliseconds.map { .milliseconds(Int64(clamping: $0)) }, id: state.id,
                createdMilliseconds: state.createdMilliseconds),
            callbacks: Callbacks(onDelivered: nil, onAbandoned: nil))
    }
}

import CourierLog
import Foundation

/// Hearing how background uploads ended (`BackgroundUploadSession.deliverCompletions`).
extension Courier {
    /// One upload ended: logged as a foreground attempt's outcome is, judged by the same retry
    /// policy and destination backoff; the message's body file is removed. In the background
    /// a failed message is handed off again at once, to begin after its backoff (and the next
    /// message of its ordering key follows a delivery); in the foreground it is the engine's.
    func hear(_ completion: BackgroundUploadCompletion) async {
        guard let uploads = configuration.backgroundUploads, !outbox.read(\.closed) else { return }
        guard let (id, handOff) = outbox.handOff(carriedBy: completion.task) else {
            await hearLate(completion)
            return
        }
        let outcome = completion.outcome
        if case .failure(let failure) = outcome, failure.kind == .cancelled {
            // `returnToForeground()` (or the system) cancelled it: not an attempt.
            if outbox.endHandOff(id, ticket: handOff.ticket, dueAtLatest: currentInstant().wallMilliseconds) {
                await onIOQueue { [self] in removeBodyFile(id) }
                pump()
            }
            return
        }
        let now = currentInstant().wallMilliseconds
        let created = await currentState(of: id)?.createdMilliseconds ?? now
        let (policyVerdict, decision, random) = judge(outcome, attempt: Int(handOff.attempt), createdMilliseconds: created,
                                                nowMilliseconds: now)
        // Its credentials were made at hand-off: the foreground makes fresh ones (`prepareRequest`).
        let unauthorized = outcome.isUnauthorized
        let judged: AttemptVerdict = unauthorized ? .retry(dueMilliseconds: now, delay: .zero) : policyVerdict
        configuration.logger.debug("background upload ended: \(outcome) → \(decision)",
                                   metadata: ["courier.message-id": "\(id)", "courier.attempt": "\(handOff.attempt)"])
        await onIOQueue { [self] in
            if unauthorized { outbox.keepInForeground(id) }
            outbox.record(judged, of: Attempt(id: id, number: Int(handOff.attempt)), outcome: outcome,
                          destination: destinationReport(outcome, nowMilliseconds: now, random: random),
                          handOff: handOff.ticket).run()
            removeBodyFile(id)
            compactIfWorthIt()
        }
        if handOffControl.withLock({ $0.inBackground }) {
            _ = await runHandOffPasses(uploads)
        } else {
            pump()
        }
    }

    /// A completion of a task that does not carry its message (any more): reconciliation gave
    /// the task up for lost, or the message was cancelled. A 2xx still delivers the message if
    /// nobody has it in flight; anything else is dropped.
    private func hearLate(_ completion: BackgroundUploadCompletion) async {
        guard let parsed = HandOff.parse(taskDescription: completion.task.taskDescription) else { return }
        let id = parsed.id
        let ended = await onIOQueue { [self] () -> [(MessageID, HandOff)] in
            var ended: [(MessageID, HandOff)] = []
            if case .response(let status, _) = completion.outcome, (200..<300).contains(status) {
                let effects = outbox.recordLateSuccess(id, attempt: parsed.attempt, status: UInt16(clamping: status))
                effects.run()
                ended = effects.endedHandOffs
            }
            if outbox.handOff(of: id) == nil { removeBodyFile(id) }
            return ended
        }
        for (id, handOff) in ended { configuration.backgroundUploads?.session.cancel(handOff.task(of: id)) }
        pump()
    }
}

/// The body files of handed-off messages, in `bodies/` beside the log's segments: created
/// `0600` in a `0700` directory by the configured file system, with the log's data protection
/// on iOS. **A body file exists only while its message is handed off** (files a kill left
/// behind are removed when the next open reconciles). Not synced: a file lost with power is
/// rebuilt from the log, which holds every body.
extension Courier {
    var bodyDirectoryPath: String { directory.path + "/" + HandOff.directoryName }

    func bodyFilePath(_ id: MessageID) -> String { bodyDirectoryPath + "/" + HandOff.bodyFileName(id) }

    func makeBodyDirectory() {
        try? configuration.fileSystem.createDirectory(atPath: bodyDirectoryPath)
        Self.applyPlatformDataProtection(to: directory)
    }

    /// Writes `body` to `path`, replacing what is there. False on failure.
    func writeBodyFile(_ body: [UInt8], to path: String) -> Bool {
        let fileSystem = configuration.fileSystem
        guard (try? fileSystem.removeFile(atPath: path)) != nil,
              let file = try? fileSystem.openFile(atPath: path, create: true) else { return false }
        return body.withUnsafeBytes { raw -> Bool in
            var done = 0
            // Each turn writes at least one byte or stops.
            while done < raw.count {
                guard let n = try? file.write(UnsafeRawBufferPointer(rebasing: raw[done...]), at: done), n > 0 else { return false }
                done += n
            }
            return true
        }
    }

    func removeBodyFile(_ id: MessageID) {
        try? configuration.fileSystem.removeFile(atPath: bodyFilePath(id))
    }

    /// Removes every body file whose message is not handed off.
    func sweepBodyFiles() {
        guard let names = try? configuration.fileSystem.contentsOfDirectory(atPath: bodyDirectoryPath) else { return }
        let handedOff = outbox.handOffs
        for name in names {
            guard name.hasSuffix(".body"), let id = MessageID(String(name.dropLast(5))), handedOff[id] != nil else {
                try? configuration.fileSystem.removeFile(atPath: bodyDirectoryPath + "/" + name)
                continue
            }
        }
    }
}

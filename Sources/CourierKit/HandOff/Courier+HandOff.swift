import CourierLog
import Foundation

/// Background hand-off (`Configuration.backgroundUploads`): giving pending messages to a
/// background upload session, hearing how each upload ended, and reconciling the log with the
/// session's tasks at open. Platform-neutral and tested on Linux against `CourierTesting`'s
/// `SimulatedBackgroundSystem`; on iOS, `URLSessionBackgroundUploads` is the session.
extension Courier {
    /// Tells the courier that the app is in the background: it hands pending messages to the
    /// background upload session, so that the system delivers them while the app is suspended
    /// or not running. Call it when the app enters the background, and when the system
    /// launched it in the background to report uploads
    /// (the lifecycle integration (`lifecycle: .automatic`) does both on iOS: at `didEnterBackground`, and after
    /// each batch of background session events). Until `appDidEnterForeground()`, messages go to
    /// the session, not the engine: those sent meanwhile, and failed uploads, handed off again
    /// at once to begin after their backoff. Up to `BackgroundUploads.maximumOutstandingTasks`
    /// messages are handed off at a time, each the head of its ordering key, in due order; more
    /// follow as uploads end.
    /// - Returns: how many messages were handed off by this call and by the hand-offs under
    ///   way that it waited for (0 without `backgroundUploads`).
    @discardableResult
    public func appDidEnterBackground() async -> Int {
        guard configuration.backgroundUploads != nil else { return 0 }
        core.handle(.place(.background), at: currentInstant()).run()
        await core.status.reconciliation?.value
        // This call's pass, from its own wake (under load it may end before the status is read),
        // and any other under way (reconciliation's end may have started one).
        let started = core.handle(.wake, at: currentInstant()).run().pass
        var passes = core.status.passes
        if let started, !passes.contains(started) { passes.append(started) }
        var handedOff = 0
        for pass in passes { handedOff += await pass.value }
        return handedOff
    }

    /// Tells the courier that the app is in the foreground again: failed uploads come back to
    /// the engine instead of being handed off again, and every task that is not sending is cancelled
    /// (`BackgroundUploadSession.cancelUnlessSending`), so its message comes back at once:
    /// a task made in the background is discretionary, and the system may hold it for hours
    /// past its begin date. A task that is sending is left to finish: a message comes back
    /// only when its task's completion is heard, so the engine and the session never both have
    /// it in flight.
    public func appDidEnterForeground() {
        collectExtensionMessagesSoon()
        guard let uploads = configuration.backgroundUploads else { return }
        core.handle(.place(.foreground), at: currentInstant()).run()
        for (id, handOff) in core.status.handOffs { uploads.session.cancelUnlessSending(handOff.task(of: id)) }
    }

    /// Messages handed off now (`appDidEnterBackground()`), whose uploads have not ended.
    public var handedOffCount: Int { core.status.handOffs.count }

    /// Whether a handed-off message goes to a destination that has said nothing yet since the
    /// courier opened. Such a hand-off is blind, so it sends only the destination's first limit's
    /// worth (4): a server that is down costs a handful of requests, not a hundred. An app that is
    /// still running (the seconds iOS grants at `didEnterBackground`) hears those answers at once,
    /// and hands off the rest before it is suspended; a suspended one would wait for a wake
    /// (each one doubling the system's rate limiter) and lose a round of uploads.
    package var awaitsFirstAnswersFromHandOffs: Bool {
        core.awaitsFirstAnswers(nowMilliseconds: currentInstant().wallMilliseconds)
    }

    /// Called by `init` with hand-off on: the engine waits for reconciliation; completions
    /// are heard from now on.
    func startBackgroundUploads(_ uploads: BackgroundUploads) {
        // Reconciliation first: completions wait for it (`hear`), or one heard while it runs
        // could make it adopt a task that has already ended. The task is made under the lock,
        // with the engine's gate closed, so nothing sees one without the other.
        core.handle(.beginReconciliation({ Task { [weak self] in await self?.reconcileHandOffs(uploads) } }))
        uploads.session.deliverCompletions { [weak self] completion in await self?.hear(completion) }
    }

    /// Reconciles the log with the session's outstanding tasks, then lets the engine start.
    private func reconcileHandOffs(_ uploads: BackgroundUploads) async {
        let tasks = await uploads.session.outstandingTasks()
        let result = await onIOQueue { [self] () -> Reconciliation in
            let reconciliation = core.handle(.reconcile(tasks)).run().reconciliation
            log.sweepBodies(keeping: core.status.handOffs)
            return reconciliation
        }
        for task in result.stale { uploads.session.cancel(task) }
        if !result.orphaned.isEmpty || !result.adopted.isEmpty {
            configuration.logger.info(
                "background hand-off reconciled",
                metadata: [
                    "courier.orphaned": "\(result.orphaned.count)", "courier.adopted": "\(result.adopted.count)",
                    "courier.stale-tasks": "\(result.stale.count)"
                ])
        }
        let ended = core.handle(.reconciliationEnded, at: currentInstant()).run()
        // On screen already: an adopted task goes back to the engine, as `appDidEnterForeground()`
        // sends back the others (it may have run before these were adopted).
        if !ended.mayHandOff {
            for (id, handOff) in result.adopted { uploads.session.cancelUnlessSending(handOff.task(of: id)) }
        }
    }

    /// One hand-off pass, started by a plan with the messages the scheduler took: hands
    /// them off, then, in one critical section, frees its place and carries out the next plan
    /// (a message taken and not handed off after all is the engine's again).
    func handOffPass(_ candidates: [Projection.Taken], token: UInt64) async -> Int {
        var handedOff = 0
        if let uploads = configuration.backgroundUploads { handedOff = await handOff(candidates, uploads) }
        core.handle(.passEnded(token: token), at: currentInstant()).run()
        return handedOff
    }

    /// A taken message ready to go: its request and its body file.
    private struct PreparedHandOff {
        var candidate: Projection.Taken
        var request: DeliveryRequest
        var ticket: UInt64
        var path: String
        var createdMilliseconds: UInt64
        var expiryMilliseconds: UInt64?
    }

    /// Hands taken messages off, a pass at a time: three critical sections and two hops to the
    /// I/O queue, whatever the count. Their states (one section; those not kept in memory read
    /// back on the read queue) and their requests (`prepareRequest`, outside any lock); every
    /// body written and synced, then their directory, in one hop (a file that power loss could
    /// cut short must never be uploaded under a valid key); the hand-offs registered (one
    /// section); the tasks made; their records logged in one batch (one section, in one hop).
    private func handOff(_ candidates: [Projection.Taken], _ uploads: BackgroundUploads) async -> Int {
        let ids = candidates.map(\.slot.id)
        let (kept, mayHandOff) = core.handOffStates(ids)
        var states = kept, aborted: [(id: MessageID, foregroundOnly: Bool)] = []
        if !mayHandOff {  // the app came back: the engine's again
            core.handle(.beginHandOffs(ready: [], aborted: ids.map { ($0, false) })).run()
            return 0
        }
        for (i, id) in ids.enumerated() where states[i] == nil { states[i] = try? await readState(of: id).get() }
        var ready: [PreparedHandOff] = []
        for (candidate, state) in zip(candidates, states) {
            // Cancelled, unreadable, or `prepareRequest` threw: left to the engine, which reads
            // again after its backoff and prepares each attempt afresh.
            guard let state,
                case .success(let request) = await preparedRequest(
                    for: state, attempt: Int(candidate.slot.attempts + 1))
            else {
                aborted.append((candidate.slot.id, true))
                continue
            }
            let ticket = configuration.random()
            ready.append(
                PreparedHandOff(
                    candidate: candidate, request: request, ticket: ticket,
                    path: log.bodyPath(of: candidate.slot.id, ticket: ticket),
                    createdMilliseconds: state.createdMilliseconds, expiryMilliseconds: state.expiryMilliseconds))
        }
        let bodies = ready.map { (body: Array($0.request.body), path: $0.path) }
        let written: [Bool] = bodies.isEmpty ? [] : await onIOQueue { [log] in log.writeBodies(bodies) }
        aborted += zip(ready, written).filter { !$1 }.map { ($0.0.candidate.slot.id, true) }
        return await commit(zip(ready, written).filter { $1 }.map(\.0), aborted: aborted, uploads)
    }

    /// Registers the hand-offs, makes their tasks, then logs their records. Registered first, so
    /// a completion heard before the record is written finds its message; the task before the
    /// record, so a kill in between leaves a task the log does not know, which the next open
    /// adopts (the other order would leave a record naming no task, which it undoes).
    private func commit(
        _ prepared: [PreparedHandOff], aborted: [(id: MessageID, foregroundOnly: Bool)], _ uploads: BackgroundUploads
    ) async -> Int {
        let now = currentInstant().wallMilliseconds
        let handOffs = prepared.map { ready in
            HandOff(
                attempt: ready.candidate.slot.attempts + 1, ticket: ready.ticket, taskIdentifier: HandOff.unknownTask,
                earliestBeginMilliseconds: max(ready.candidate.beginMilliseconds, now),
                createdMilliseconds: ready.createdMilliseconds, expiryMilliseconds: ready.expiryMilliseconds)
        }
        let begun = core.handle(
            .beginHandOffs(ready: zip(prepared, handOffs).map { ($0.candidate.slot.id, $1) }, aborted: aborted)
        ).run().taken
        guard !prepared.isEmpty else { return 0 }
        var made: [(id: MessageID, ticket: UInt64, taskIdentifier: UInt64)] = [], tasks: [BackgroundUploadTask] = []
        var gone: [String] = []  // body files of hand-offs that did not begin: cancelled meanwhile
        for (i, ready) in prepared.enumerated() {
            guard begun[i] else {
                gone.append(ready.path)
                continue
            }
            let task = uploads.session.makeUploadTask(uploadRequest(ready, handOffs[i]))
            tasks.append(task)
            made.append((ready.candidate.slot.id, ready.ticket, UInt64(bitPattern: Int64(task.identifier))))
        }
        let recorded = await onIOQueue { [self, made] in core.handle(.recordHandOffs(made)).run() }
        for (task, (done, entry)) in zip(tasks, zip(recorded.taken, made)) {
            if !done {
                // Cancelled meanwhile, or its completion was heard already: the task has no message.
                uploads.session.cancel(task)
                gone.append(log.bodyPath(of: entry.id, ticket: entry.ticket))
            } else if !recorded.mayHandOff {
                // The app came back while this was being made: back to the engine, as
                // `appDidEnterForeground()` does for the others.
                uploads.session.cancelUnlessSending(task)
            }
        }
        if !gone.isEmpty { await onIOQueue { [log, gone] in for path in gone { log.removeBody(at: path) } } }
        return recorded.taken.filter { $0 }.count
    }

    /// The session's request for a hand-off: the message's request, its body file, its begin
    /// date, and the app's network policy, which holds for uploads as for the engine's attempts.
    private func uploadRequest(_ ready: PreparedHandOff, _ handOff: HandOff) -> BackgroundUploadRequest {
        let id = ready.candidate.slot.id
        var upload = BackgroundUploadRequest(
            url: ready.request.url, headers: ready.request.headers, bodyFile: URL(fileURLWithPath: ready.path),
            bodyByteCount: ready.request.body.count,
            earliestBeginDate: Date(timeIntervalSince1970: Double(handOff.earliestBeginMilliseconds) / 1000),
            taskDescription: HandOff.taskDescription(id, attempt: handOff.attempt, ticket: ready.ticket))
        upload.allowsCellularAccess = configuration.allowsCellularAccess
        upload.allowsExpensiveNetworkAccess = configuration.allowsExpensiveNetworkAccess
        upload.allowsConstrainedNetworkAccess = configuration.allowsConstrainedNetworkAccess
        upload.tags = ready.request.tags
        return upload
    }
}

extension HandOff {
    /// The session's task carrying message `id`.
    func task(of id: MessageID) -> BackgroundUploadTask {
        BackgroundUploadTask(
            identifier: Int(Int64(bitPattern: taskIdentifier)),
            taskDescription: HandOff.taskDescription(id, attempt: attempt, ticket: ticket))
    }
}

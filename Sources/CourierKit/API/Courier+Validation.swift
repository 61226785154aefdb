import CourierLog

extension Courier.Configuration {
    /// Bytes a message's URL and extra headers may take beside a body of `maximumMessageBytes`
    /// in the check `init` makes: a body of the maximum size with a URL and headers this small
    /// always fits one record. `send` checks the real encoded size and throws
    /// `.messageTooLarge` for a message whose URL and headers make it too big for a segment.
    static let envelopeAllowanceBytes = 512

    /// The log settings these Courier settings make.
    func logConfiguration() -> WriteAheadLog.Configuration {
        var log = WriteAheadLog.Configuration()
        log.segmentSizeBytes = segmentSizeBytes
        // Appends run under the core's lock, where nothing may wait for the disk: the next
        // segment is prepared, and a sealed one synced, on the log's own queue.
        log.segmentPreparation = .background
        // `.always` is applied by Courier itself, outside its lock: every record is synced
        // before it is seen (`CourierCore.write`, compaction's own sync), so
        // concurrent callers share fsyncs. The log itself never syncs on a timer then (a
        // backstop would also hide, in the power-loss tests, a record that was not synced).
        log.syncPolicy = durability.logPolicy
        return log
    }

    /// Every conflict in these settings, in words that name the settings; empty when valid.
    /// `Courier.init` throws `.invalidConfiguration` with the first one.
    public var problems: [String] {
        var problems: [String] = []
        func require(_ condition: Bool, _ problem: @autoclosure () -> String) {
            if !condition { problems.append(problem()) }
        }
        let log = logConfiguration()
        if let problem = log.problem { problems.append(problem) }
        if let uploads = backgroundUploads {
            require(
                uploads.maximumOutstandingTasks >= 1 && uploads.maximumOutstandingTasks <= 10_000,
                "backgroundUploads.maximumOutstandingTasks is \(uploads.maximumOutstandingTasks); it must be from 1 to "
                    + "10000"
            )
            require(
                fileProtection != .complete && fileProtection != .completeUnlessOpen,
                "fileProtection .\(fileProtection) with backgroundUploads: the system's upload daemon reads each "
                    + "handed-off body file while the device may be locked, and a file of that class cannot be read "
                    + "then (the upload fails, and is retried until the device is unlocked); use "
                    + ".completeUntilFirstUserAuthentication (the default), or no background uploads"
            )
        }
        require(
            maximumConcurrentDeliveries >= 1 && maximumConcurrentDeliveries <= 1_000,
            "maximumConcurrentDeliveries is \(maximumConcurrentDeliveries); it must be from 1 to 1000")
        let limit = concurrencyLimit
        require(
            limit.initialLimit >= 1 && limit.minimumLimit >= 1,
            "concurrencyLimit's initialLimit (\(limit.initialLimit)) and minimumLimit "
                + "(\(limit.minimumLimit)) must be at least 1")
        require(
            limit.backoffRatio > 0 && limit.backoffRatio < 1,
            "concurrencyLimit.backoffRatio is \(limit.backoffRatio); it must be between 0 and 1")
        require(
            limit.latencyTolerance > 1,
            "concurrencyLimit.latencyTolerance is \(limit.latencyTolerance); it must be above 1")
        require(requestTimeout > .zero, "requestTimeout must be positive (it is \(requestTimeout))")
        require(maximumMessageBytes >= 0, "maximumMessageBytes must not be negative")
        if log.problem == nil {
            let largest = log.maximumRecordBytes - Event.stateOverheadBytes - Self.envelopeAllowanceBytes
            require(
                maximumMessageBytes <= largest,
                "maximumMessageBytes (\(maximumMessageBytes)) does not fit segmentSizeBytes (\(segmentSizeBytes)): a "
                    + "segment of that size holds messages of at most \(max(0, largest)) bytes; raise segmentSizeBytes "
                    + "or lower maximumMessageBytes"
            )
        }
        require(
            maximumStorageBytes >= 2 * segmentSizeBytes,
            "maximumStorageBytes (\(maximumStorageBytes)) must be at least twice segmentSizeBytes "
                + "(\(segmentSizeBytes)): compaction frees space a whole sealed segment at a time"
        )
        require(compactionThreshold >= 1, "compactionThreshold must be at least 1")
        require(resolvedMemoryCount >= 0, "resolvedMemoryCount must not be negative")
        problems += retry.problems + retryBudget.problems
        require(
            destinationBackoff.maximumProbeDelay > .zero,
            "destinationBackoff.maximumProbeDelay must be positive (it is \(destinationBackoff.maximumProbeDelay))")
        return problems
    }
}

extension RetryPolicy {
    /// Every value out of range, in words; empty when valid.
    var problems: [String] {
        var problems: [String] = []
        if initialDelay < .zero { problems.append("retry.initialDelay must not be negative") }
        if maximumDelay < .zero { problems.append("retry.maximumDelay must not be negative") }
        if !(multiplier.isFinite && multiplier >= 1) {
            problems.append("retry.multiplier must be a finite number of at least 1 (it is \(multiplier))")
        }
        if let attempts = maximumAttempts, attempts < 1 {
            problems.append("retry.maximumAttempts must be at least 1 (or nil)")
        }
        if let expiry, expiry <= .zero { problems.append("retry.expiry must be positive (or nil)") }
        if retryAfterLimit < .zero { problems.append("retry.retryAfterLimit must not be negative") }
        return problems + explainedFailures.problems
    }
}

extension Courier {
    /// Refuses, before anything is written, an event the log could not hold in one record
    /// whatever its compression: the writer would refuse it too, and a reader could never
    /// meet a record the writer did not accept.
    func checkRecordSize(_ encoded: [UInt8], bodyBytes: Int) throws(CourierError) {
        guard encoded.count <= maximumRecordBytes else {
            throw CourierError(
                .messageTooLarge,
                "the message (body \(bodyBytes) bytes, with its URL and headers \(encoded.count) bytes) does not fit "
                    + "one record of a \(configuration.segmentSizeBytes)-byte segment (at most \(maximumRecordBytes) "
                    + "bytes); raise Configuration.segmentSizeBytes"
            )
        }
    }
}

extension Courier.Configuration {
    /// What the core enforces of this configuration.
    var coreLimits: CourierCore.Limits {
        let uploads = backgroundUploads
        return CourierCore.Limits(
            maximumStorageBytes: maximumStorageBytes, segmentSizeBytes: segmentSizeBytes,
            compactionThreshold: compactionThreshold,
            scheduler: Scheduler.Limits(
                maximumConcurrentDeliveries: maximumConcurrentDeliveries,
                maximumHandOffs: uploads?.maximumOutstandingTasks ?? 0,
                isExcludedFromHandOff: { uploads?.isExcluded($0) ?? true }),
            compacts: isCompactionEnabled, syncsEachRecord: durability == .always)
    }
}

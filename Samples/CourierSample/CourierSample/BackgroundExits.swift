import MetricKit
import Observation
import os

/// MetricKit's reports of how the app ended, for check 4: a kill for holding a file lock while
/// suspended (0xdead10cc) counts in `cumulativeSuspendedWithLockedFileExitCount` of the daily
/// report and comes as a crash diagnostic. Each is logged (os.Logger, category "metrickit") and
/// the newest shown on the Debug tab.
@MainActor @Observable
final class BackgroundExits {
    /// The newest daily report's background exits, in words.
    private(set) var latestExits: String?
    /// The newest crash diagnostic's termination reason.
    private(set) var latestCrash: String?
    @ObservationIgnored private var subscriber: ReportSubscriber?

    /// At launch: MetricKit delivers only to a subscriber, the reports of earlier days included.
    func start() {
        guard subscriber == nil else { return }
        let subscriber = ReportSubscriber { [weak self] exits, crash in
            // MetricKit calls on a background queue: the main actor gets strings only.
            Task { @MainActor in
                if let exits { self?.latestExits = exits }
                if let crash { self?.latestCrash = crash }
            }
        }
        MXMetricManager.shared.add(subscriber)
        self.subscriber = subscriber
    }
}

/// MetricKit's subscriber. MetricKit calls it on a background queue; it reads the payloads
/// there and passes on text.
private final class ReportSubscriber: NSObject, MXMetricManagerSubscriber, Sendable {
    let report: @Sendable (_ exits: String?, _ crash: String?) -> Void

    init(report: @escaping @Sendable (_ exits: String?, _ crash: String?) -> Void) {
        self.report = report
    }

    func didReceive(_ payloads: [MXMetricPayload]) {
        let logger = Logger(subsystem: "com.example.courier-sample", category: "metrickit")
        let texts = payloads.compactMap(Self.backgroundExits)
        for text in texts { logger.notice("background exits \(text, privacy: .public)") }
        if let newest = texts.last { report(newest, nil) }
    }

    func didReceive(_ payloads: [MXDiagnosticPayload]) {
        let logger = Logger(subsystem: "com.example.courier-sample", category: "metrickit")
        let crashes = payloads.flatMap { $0.crashDiagnostics ?? [] }.map { crash in
            "crash: \(crash.terminationReason ?? "no termination reason"), exception type "
                + "\(crash.exceptionType?.stringValue ?? "none"), signal \(crash.signal?.stringValue ?? "none")"
        }
        for text in crashes { logger.notice("\(text, privacy: .public)") }
        if let newest = crashes.last { report(nil, newest) }
    }

    /// One report's background exits, the lock kills first.
    static func backgroundExits(in payload: MXMetricPayload) -> String? {
        guard let exits = payload.applicationExitMetrics?.backgroundExitData else { return nil }
        let counts = [
            ("suspended with a locked file (0xdead10cc)", exits.cumulativeSuspendedWithLockedFileExitCount),
            ("background task assertion timeout", exits.cumulativeBackgroundTaskAssertionTimeoutExitCount),
            ("memory limit", exits.cumulativeMemoryResourceLimitExitCount),
            ("memory pressure", exits.cumulativeMemoryPressureExitCount),
            ("CPU limit", exits.cumulativeCPUResourceLimitExitCount),
            ("watchdog", exits.cumulativeAppWatchdogExitCount),
            ("bad access", exits.cumulativeBadAccessExitCount),
            ("illegal instruction", exits.cumulativeIllegalInstructionExitCount),
            ("abnormal", exits.cumulativeAbnormalExitCount),
            ("normal", exits.cumulativeNormalAppExitCount),
        ]
        let period = payload.timeStampBegin.formatted() + " – " + payload.timeStampEnd.formatted()
        return period + ": " + counts.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
    }
}

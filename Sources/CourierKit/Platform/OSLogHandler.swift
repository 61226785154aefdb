#if canImport(os)
import Logging
import os

// Apple platforms only (the unified log): type-checked for iOS by `make ios-check`, never run
// here. It only maps swift-log's calls onto `os.Logger`.

/// Courier's log lines (swift-log, `Configuration.logger`) in the unified log (`os.Logger`),
/// where Console and `log stream` show them:
///
///     configuration.logger = .osLog(subsystem: "com.example.app")
///
/// Levels map trace and debug to `.debug`, info to `.info`, notice to `.default`, warning and error to
/// `.error`, critical to `.fault`. Messages and metadata are logged `.public`: Courier's lines
/// carry message ids, attempt numbers, statuses and destinations (scheme, host and port),
/// never a body or a header.
public struct OSLogHandler: LogHandler {
    public var metadata: Logging.Logger.Metadata = [:]
    public var logLevel: Logging.Logger.Level
    private let logger: os.Logger

    /// A handler writing to `subsystem` and `category`, from `logLevel` up.
    public init(subsystem: String, category: String = "courier", logLevel: Logging.Logger.Level = .info) {
        logger = os.Logger(subsystem: subsystem, category: category)
        self.logLevel = logLevel
    }

    public subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let fields = metadata.merging(event.metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let type: OSLogType =
            switch event.level {
            case .trace, .debug: .debug
            case .info: .info
            case .notice: .default  // persisted, as swift-log's notice means
            case .warning, .error: .error
            case .critical: .fault
            }
        logger.log(level: type, "\(event.message.description, privacy: .public) \(fields, privacy: .public)")
    }
}

extension Logging.Logger {
    /// A logger for `Configuration.logger` that writes to the unified log (`OSLogHandler`).
    public static func osLog(
        subsystem: String, category: String = "courier", logLevel: Logging.Logger.Level = .info
    ) -> Logging.Logger {
        Logging.Logger(label: "\(subsystem).\(category)") { _ in
            OSLogHandler(subsystem: subsystem, category: category, logLevel: logLevel)
        }
    }
}
#endif

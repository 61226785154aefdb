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
/// `.error`, critical to `.fault`. A line's message and metadata are `.private` unless the app
/// chooses `.public`: the unified log then shows `<private>` in place of them outside a debugging
/// session, as it does for any dynamic string, so that a handler an app reuses for its own
/// loggers never puts personal data in logs and sysdiagnoses. Courier's own lines carry message
/// ids, attempt numbers, statuses and destinations (scheme, host and port), never a body or a
/// header: `.public` suits them on devices you debug.
public struct OSLogHandler: LogHandler {
    public var metadata: Logging.Logger.Metadata = [:]
    public var logLevel: Logging.Logger.Level
    /// Whether the unified log shows a line's message and metadata, or `<private>`.
    public var privacy: Privacy
    private let logger: os.Logger

    /// How the unified log shows what a line says (`OSLogPrivacy`).
    public enum Privacy: Sendable {
        /// Redacted outside a debugging session (the default).
        case `private`
        /// Shown: for Courier's own lines, or any without personal data.
        case `public`
    }

    /// A handler writing to `subsystem` and `category`, from `logLevel` up.
    public init(
        subsystem: String, category: String = "courier", logLevel: Logging.Logger.Level = .info,
        privacy: Privacy = .private
    ) {
        logger = os.Logger(subsystem: subsystem, category: category)
        self.logLevel = logLevel
        self.privacy = privacy
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
        // OSLog's privacy must be a constant where it is written (the compiler checks it after
        // type-checking): one call per choice.
        switch privacy {
        case .private:
            logger.log(level: type, "\(event.message.description, privacy: .private) \(fields, privacy: .private)")
        case .public:
            logger.log(level: type, "\(event.message.description, privacy: .public) \(fields, privacy: .public)")
        }
    }
}

extension Logging.Logger {
    /// A logger for `Configuration.logger` that writes to the unified log (`OSLogHandler`).
    public static func osLog(
        subsystem: String, category: String = "courier", logLevel: Logging.Logger.Level = .info,
        privacy: OSLogHandler.Privacy = .private
    ) -> Logging.Logger {
        Logging.Logger(label: "\(subsystem).\(category)") { _ in
            OSLogHandler(subsystem: subsystem, category: category, logLevel: logLevel, privacy: privacy)
        }
    }
}
#endif

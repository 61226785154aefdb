import CourierKit
import Logging
import os

// RunningOnIOS.md, "Logging to os.Logger", compiled for iOS by `make ios-check`.

// snippet: oslog-handler
struct OSLogHandler: LogHandler {
    let logger: os.Logger
    var metadata: Logging.Logger.Metadata = [:]
    var logLevel: Logging.Logger.Level = .info
    subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let fields = metadata.merging(event.metadata ?? [:]) { $1 }.map { "\($0)=\($1)" }.joined(separator: " ")
        let type: OSLogType =
            switch event.level {
            case .trace, .debug: .debug
            case .info, .notice: .info
            case .warning, .error: .error
            case .critical: .fault
            }
        logger.log(level: type, "\(event.message.description, privacy: .public) \(fields, privacy: .public)")
    }
}
// snippet end

func logging(_ configuration: inout Courier.Configuration) {
    // snippet: oslog-configuration
    configuration.logger = Logger(label: "courier") { _ in
        OSLogHandler(logger: os.Logger(subsystem: "com.example.app", category: "courier"))
    }
    // snippet end
}

import CourierKit
import Logging

// RunningOnIOS.md, "Logging to os.Logger", compiled for iOS by `make ios-check`.

func logging(_ configuration: inout Courier.Configuration) {
    // snippet: oslog-configuration
    configuration.logger = .osLog(subsystem: "com.example.app")  // Console and `log stream` show it
    configuration.logger = .osLog(subsystem: "com.example.app", privacy: .public)  // Courier's own lines
    // snippet end
}

// courier-outbox: the two sides of `ExtensionOutbox` as processes, for the tests that SIGKILL
// them (ExtensionProcessTests) and the outbox benchmark.
//
//     courier-outbox write DIR URL COUNT NAME [PAUSE_MICROSECONDS]
//         sends COUNT messages {"w": NAME, "n": i} to URL through an ExtensionOutbox in DIR,
//         printing each id once `send` returned (acknowledged)
//     courier-outbox app APP_DIR OUTBOX_DIR
//         opens a courier in APP_DIR collecting OUTBOX_DIR, and collects every 20 ms until killed
@_spi(CourierTesting) import CourierKit
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a line straight to file descriptor 1: a parent reading the pipe sees it even if
/// this process is killed the next instant.
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

func usage() -> Never {
    emit("usage: courier-outbox write DIR URL COUNT NAME [PAUSE_MICROSECONDS] | app APP_DIR OUTBOX_DIR")
    exit(2)
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "write":
    guard arguments.count >= 5, let target = URL(string: arguments[2]), let count = Int(arguments[3]) else { usage() }
    let name = arguments[4]
    let pause = arguments.count > 5 ? UInt32(arguments[5]) ?? 0 : 0
    do {
        let outbox = try ExtensionOutbox(directory: URL(fileURLWithPath: arguments[1]), allowingPurgeable: true)
        // Bounded: COUNT sends.
        for n in 0..<count {
            emit(try outbox.send(["w": name, "n": n], to: target, tags: ["w:" + name]).description)
            if pause > 0 { usleep(pause) }
        }
    } catch {
        emit("error: \(error)")
        exit(1)
    }
case "app":
    guard arguments.count == 3 else { usage() }
    var configuration = Courier.Configuration()
    configuration.allowsPurgeableDirectory = true  // a test's scratch directory, in tmp
    configuration.extensionOutboxDirectory = URL(fileURLWithPath: arguments[2])
    configuration.retry = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(50))
    do {
        let courier = try Courier(directory: URL(fileURLWithPath: arguments[1]), configuration: configuration)
        emit("open")
        // Until killed: one collection every 20 ms.
        while true {
            await courier.collectExtensionMessages()
            try? await Task.sleep(for: .milliseconds(20))
        }
    } catch {
        emit("error: \(error)")
        exit(1)
    }
default:
    usage()
}

// courier-load: sends messages through a Courier and prints each id as soon as `send`
// returned (flushed), so a parent process knows exactly which sends were acknowledged. Used by
// the SIGKILL crash test and for quick load runs.
//
//     courier-load DIR URL COUNT [PAUSE_MICROSECONDS]
import Courier
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let args = CommandLine.arguments
guard args.count == 4 || args.count == 5, let url = URL(string: args[2]), let count = Int(args[3]) else {
    print("usage: courier-load DIR URL COUNT [PAUSE_MICROSECONDS]")
    exit(2)
}
let pause = args.count == 5 ? UInt32(args[4]) ?? 0 : 0
/// Writes a line straight to file descriptor 1 (no stdio buffer): once written, a parent
/// reading the pipe sees it even if this process is killed the next instant.
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}
var config = Courier.Configuration()
config.retry = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(50))
let courier: Courier
do {
    courier = try Courier(directory: URL(fileURLWithPath: args[1]), configuration: config)
} catch {
    emit("error: \(error)")
    exit(1)
}
for i in 0..<count {
    do {
        let id = try courier.send(["n": i, "text": "message \(i) from pid \(getpid())"], to: url)
        emit(id.description)
        if pause > 0 { usleep(pause) }
    } catch {
        emit("error: \(error)")
        exit(1)
    }
}
await courier.waitUntilIdle()
await courier.close()
emit("done")

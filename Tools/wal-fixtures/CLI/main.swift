// wal-fixtures: writes the golden logs of Fixtures/logs, or a small demo log.
//
//     wal-fixtures golden Fixtures/logs     (what `make fixtures` runs: the log layer's logs
//                                            and the messaging layer's `courier-v1`)
//     wal-fixtures demo DIR                 (a small log of made-up records)
import CourierLog
import CourierLogTesting
import GoldenRecords

let arguments = CommandLine.arguments
guard arguments.count == 3, ["golden", "demo"].contains(arguments[1]) else {
    print("usage: wal-fixtures golden|demo DIR")
    exitProcess(2)
}
let fs = PosixFileSystem()
do {
    if arguments[1] == "golden" {
        try GoldenLogs.writeAll(root: arguments[2], fileSystem: fs)
        try GoldenRecords.write(directory: arguments[2] + "/" + GoldenRecords.name, fileSystem: fs)
        print("wrote golden logs under \(arguments[2])")
    } else {
        let log = try WriteAheadLog(directory: arguments[2])
        for i in 0..<5 {
            try log.append(Array(#"{"id":"demo-\#(i)","text":"hello \#(i)"}"#.utf8), kind: .enqueued)
        }
        try log.append(batch: [
            LogEntry(kind: .attempted, body: Array(#"{"id":"demo-0","status":500}"#.utf8)),
            LogEntry(kind: .delivered, body: Array(#"{"id":"demo-1"}"#.utf8))
        ])
        try log.close()
        print("wrote a demo log to \(arguments[2])")
    }
} catch {
    print("wal-fixtures: \(error)")
    exitProcess(1)
}

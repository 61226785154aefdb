import CourierLog
import Foundation

/// The body files of handed-off messages, in `bodies/` beside the log's segments, one per
/// hand-off (`<id>-<ticket>.body`): created `0600` in a `0700` directory by the configured file
/// system, with the log's data protection on iOS, and synced (with their directory) before
/// their task is made, so no upload can read a file that power loss cut short. **A body file
/// exists only while its hand-off lasts** (files a kill left behind are removed when the next
/// open reconciles). Blocking file work, every call: keep it off the cooperative pool.
extension MessageLog {
    var bodyDirectoryPath: String { directory.path + "/" + HandOff.directoryName }

    func bodyPath(of id: MessageID, ticket: UInt64) -> String {
        bodyDirectoryPath + "/" + HandOff.bodyFileName(id, ticket: ticket)
    }

    func makeBodyDirectory() { protect(bodyDirectoryPath) }

    /// Writes `body` to `path`, replacing what is there, and syncs it. False on failure.
    func writeBody(_ body: [UInt8], to path: String) -> Bool {
        guard (try? fileSystem.removeFile(atPath: path)) != nil,
            let file = try? fileSystem.openFile(atPath: path, create: true)
        else { return false }
        let written = body.withUnsafeBytes { raw -> Bool in
            var done = 0
            // Each turn writes at least one byte or stops.
            while done < raw.count {
                let rest = UnsafeRawBufferPointer(rebasing: raw[done...])
                guard let n = try? file.write(rest, at: done), n > 0 else { return false }
                done += n
            }
            return true
        }
        return written && (try? file.sync()) != nil
    }

    /// Makes the body files written so far part of their directory for good (one sync for a
    /// whole pass: no upload may read a file that power loss could unlink).
    func syncBodyDirectory() {
        try? fileSystem.syncDirectory(atPath: bodyDirectoryPath)
    }

    func removeBody(at path: String) {
        try? fileSystem.removeFile(atPath: path)
    }

    func removeBody(of id: MessageID, ticket: UInt64) {
        removeBody(at: bodyPath(of: id, ticket: ticket))
    }

    /// Removes every body file whose hand-off is not among `handOffs`.
    func sweepBodies(keeping handOffs: [MessageID: HandOff]) {
        guard let names = try? fileSystem.contentsOfDirectory(atPath: bodyDirectoryPath) else { return }
        for name in names {
            if let (id, ticket) = HandOff.parse(bodyFileName: name), handOffs[id]?.ticket == ticket { continue }
            removeBody(at: bodyDirectoryPath + "/" + name)
        }
    }
}

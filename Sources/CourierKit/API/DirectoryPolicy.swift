import Foundation

/// Where a courier may keep its log, checked by `Courier.init` before anything is written:
///
/// - **tmp** (`NSTemporaryDirectory()`, `/tmp`, `/var/tmp`, `/dev/shm`): `.unsuitableDirectory`,
///   emptied at reboot, or by the system when it needs space;
/// - **Caches** (the user's caches directory, any `Library/Caches`): `.unsuitableDirectory`, iOS
///   purges it when the device runs low on space;
/// - **inside an iOS App Group container** (`…/Shared/AppGroup/…`): `.unsuitableDirectory`: a
///   courier locks its directory for its whole life, and iOS kills a process suspended holding
///   a lock in a shared container (`0xdead10cc`). Extensions write to an `ExtensionOutbox` there
///   instead. (A macOS group container opens: macOS does not kill a suspended process for it.)
/// - anything else (Application Support, Documents, a server's data directory): opens.
///
/// Pure path logic (no file is touched), so it is tested on Linux with the roots given.
enum DirectoryPolicy {
    /// What a directory is, for a courier.
    struct Verdict: Equatable {
        /// Inside the root at `path`, a directory of `kind` ("tmp", "Caches") the system purges;
        /// nil if not.
        var purgeable: Root?
        /// Inside an iOS App Group container (`…/Shared/AppGroup/…`).
        var inAppGroupContainer = false
    }

    /// A directory the system may empty, and what it is.
    struct Root: Equatable {
        var path: String
        var kind: String
    }

    /// The judgement of `directory`, against `roots` (default: this machine's).
    static func judge(_ directory: URL, roots: [Root] = systemRoots) -> Verdict {
        var verdict = Verdict()
        let paths = Set([directory.standardizedFileURL.path, directory.resolvingSymlinksInPath().path])
        for root in roots where root.path.count > 1 && verdict.purgeable == nil {
            let rootPath = root.path.hasSuffix("/") ? String(root.path.dropLast()) : root.path
            if paths.contains(where: { $0 == rootPath || $0.hasPrefix(rootPath + "/") }) {
                verdict.purgeable = Root(path: rootPath, kind: root.kind)
            }
        }
        for path in paths {
            let components = path.split(separator: "/")
            // Bounded by the path's components.
            for (a, b) in zip(components, components.dropFirst()) {
                if a == "Library" && b == "Caches" && verdict.purgeable == nil {
                    verdict.purgeable = Root(path: "Library/Caches", kind: "Caches")
                }
                if a == "Shared" && b == "AppGroup" {
                    verdict.inAppGroupContainer = true
                }
            }
        }
        return verdict
    }

    /// This machine's temporary and caches directories, as given and with symlinks resolved
    /// (`/tmp` is `/private/tmp` on macOS).
    static var systemRoots: [Root] {
        var roots = [NSTemporaryDirectory(), "/tmp", "/var/tmp", "/dev/shm"].map { Root(path: $0, kind: "tmp") }
        roots += FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).map {
            Root(path: $0.path, kind: "Caches")
        }
        return roots.flatMap { root in
            [root, Root(path: URL(fileURLWithPath: root.path).resolvingSymlinksInPath().path, kind: root.kind)]
        }
    }

    /// The error `Courier.init` throws for a purgeable directory.
    static func error(_ directory: URL, root: Root) -> CourierError {
        CourierError(
            .unsuitableDirectory,
            "\(directory.path) is inside \(root.path), a \(root.kind) directory the system empties (at reboot, "
                + "or when it needs space), so pending messages would be lost. Keep the log in Application Support "
                + "(FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)), or on Linux "
                + "in the service's data directory; tests and scratch tools may set "
                + "Configuration.allowsPurgeableDirectory")
    }

    /// The error `Courier.init` throws for a directory in an App Group container.
    static func appGroupError(_ directory: URL) -> CourierError {
        CourierError(
            .unsuitableDirectory,
            "\(directory.path) is in an App Group container: a courier holds a file lock on its directory while "
                + "open, and iOS kills a suspended process holding a lock in a shared container (0xdead10cc). Keep "
                + "the courier in the app's own container (Application Support), and give extensions an "
                + "ExtensionOutbox in the shared one (DocC: \"Sending from app extensions\")")
    }
}

// `SimulatedApp.fileSystem` is a `SimulatedFileSystem`, a double of the log's file system that
// can fail any operation and stop at any byte (a crash, a power cut): an app's tests reach it
// through `import CourierTesting` alone. CourierLogTesting is not a product of its own.
@_exported import CourierLogTesting

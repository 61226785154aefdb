// Type-checking only (`make ios-check` on Linux); never compiled into anything.
//
// The iOS 17.4 SDK ships the Swift 5.10 standard library; an app built with Xcode 16.3 or
// later gets Swift 6's. This file declares the Swift 6 additions that the older library lacks,
// each with the availability its real declaration has, so that the check sees what Xcode sees
// (`../shared/ios/Swift6Shims.swift` is the reference for what may be declared here):
// - `Result(catching:)` and `Result.get()` with typed throws (SE-0413) are
//   `@_alwaysEmitIntoClient` in Swift 6: an app has them at any deployment target.
// - `String(validating:as:)` (SE-0405) is `@available(SwiftStdlib 6.0, *)`: iOS 18, macOS 15,
//   tvOS 18, watchOS 11, visionOS 2. Code for iOS 16 must not call it unguarded, and with this
//   declaration the check reports such a call as Xcode does ("only available in iOS 18.0").
extension Result where Failure: Error {
    init(catching body: () throws(Failure) -> Success) {
        do { self = .success(try body()) } catch { self = .failure(error) }
    }
}

extension Result {
    func get() throws(Failure) -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let error): throw error
        }
    }
}

@available(iOS 18.0, macOS 15.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
extension String {
    init?<Encoding: Unicode.Encoding>(
        validating codeUnits: some Sequence<Encoding.CodeUnit>, as encoding: Encoding.Type
    ) {
        fatalError("declaration for type-checking only")
    }

    init?<Encoding: Unicode.Encoding>(validating codeUnits: some Sequence<Int8>, as encoding: Encoding.Type)
    where Encoding.CodeUnit == UInt8 {
        fatalError("declaration for type-checking only")
    }
}

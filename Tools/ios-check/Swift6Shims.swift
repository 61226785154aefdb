// Type-checking only (`make ios-check` on Linux); never compiled into anything.
//
// The iOS 17.4 SDK ships the Swift 5.10 standard library. An app built with Xcode 16 or later
// (Swift 6) gets the newer library's `@inlinable` additions at any deployment target, since
// they are compiled into the app; this file declares the ones Courier uses (SE-0405's validating
// initializers, SE-0413's typed-throws `Result(catching:)`), with
// bodies that never run, so that the check sees what Xcode sees.
extension String {
    init?<Encoding: Unicode.Encoding>(validating codeUnits: some Sequence<Encoding.CodeUnit>, as encoding: Encoding.Type) {
        fatalError("declaration for type-checking only")
    }

    init?<Encoding: Unicode.Encoding>(validating codeUnits: some Sequence<Int8>, as encoding: Encoding.Type)
    where Encoding.CodeUnit == UInt8 {
        fatalError("declaration for type-checking only")
    }
}

extension Result where Failure: Error {
    init(catching body: () throws(Failure) -> Success) {
        do { self = .success(try body()) } catch { self = .failure(error) }
    }
}

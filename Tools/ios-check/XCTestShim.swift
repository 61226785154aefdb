// XCTest as the device kit's tests use it, for `make ios-check` only: Xcode keeps XCTest beside
// the iOS SDK, not in it, so the tests are type-checked against these declarations, written as
// XCTest's Swift interface (Xcode 16) declares them: the same names, labels, types and throws.
// XCTest gives them no availability attributes (each predates iOS 16), nor isolation. Never
// linked: a body that runs is a bug in the check.
@_exported import Foundation  // as XCTest's module does (its Objective-C headers import Foundation)

open class XCTest: NSObject {}
open class XCTestCase: XCTest {
    public override init() { super.init() }
    public init(selector: Selector) { super.init() }
}

public func XCTAssertTrue(
    _ expression: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) { fatalError("XCTest shim") }

public func XCTAssertFalse(
    _ expression: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) { fatalError("XCTest shim") }

public func XCTAssertNil(
    _ expression: @autoclosure () throws -> Any?, _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) { fatalError("XCTest shim") }

public func XCTAssertNotNil(
    _ expression: @autoclosure () throws -> Any?, _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) { fatalError("XCTest shim") }

public func XCTAssertEqual<T: Equatable>(
    _ expression1: @autoclosure () throws -> T, _ expression2: @autoclosure () throws -> T,
    _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line
) { fatalError("XCTest shim") }

public func XCTFail(_ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
    fatalError("XCTest shim")
}

public func XCTUnwrap<T>(
    _ expression: @autoclosure () throws -> T?, _ message: @autoclosure () -> String = "",
    file: StaticString = #filePath, line: UInt = #line
) throws -> T { fatalError("XCTest shim") }

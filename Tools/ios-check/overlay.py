"""The SDK's modules as Xcode 26 would show them to this compiler: `make ios-check`'s overlay.

The iOS 17.4 SDK here was built by Swift 5.10; the compiler is Linux's Swift 6.3. To run the
compiler past type-checking (`-emit-sil`: SILGen and the mandatory diagnostic passes, Swift 6's
data-race checks, region isolation and `sending`, among them), three of the SDK's modules are
given as Swift 6 declares them, in a directory searched before the SDK (`-I`). Each interface is
rewritten only when it changes, so the module cache keyed on it stays warm.

- `Observation`: the `@Observable` macro's declaration names `shouldNotifyObservers`, as the
  compiler's macro plugin (6.2+) expands it; the 17.4 declaration does not, and every
  `@Observable` class fails ("declaration name 'shouldNotifyObservers' is not covered").
- `Swift`: plus `_willThrowTyped` and `_willThrowTypedImpl`, as Swift 6's ErrorType.swift declares
  them (the Impl iOS 18+, the wrapper always emitted into the client): Swift 6's SILGen looks
  them up for every `throw` in a `throws(E)` function, and without them crashes (a null
  dereference in `SILGenFunction::emitThrow`).
- `_Concurrency`: this toolchain's own (Swift 6: `sending` Task operations and continuation
  values, `@isolated(any)`), built for Linux, retargeted to iOS: Objective-C interop on;
  `@backDeployed` attributes dropped (the interface prints no bodies for them); `BitwiseCopyable`
  conformances dropped (5.10's Swift has no such protocol); the async iterator and sequence
  `Failure` witnesses marked iOS 18, as the associated types they witness; and the
  Objective-C-only helpers SILGen needs for an imported async method (`#if _runtime(_ObjC)` in
  the standard library, so not on Linux) added in their Swift 6 form. With the 17.4 SDK's own
  (5.10), region isolation gives wrong answers both ways (a `Task` closure is `@Sendable` there,
  not `sending`). Availability comes from the Linux interface, which prints Apple's versions.

What this is not: what Xcode compiles. It is Swift 6.3 over the iOS 17.4 SDK, so it can be wrong
both ways: the 17.4 frameworks lack the `@MainActor` and `@Sendable` annotations iOS 18's and
26's carry (an error Xcode 26 reports may pass here), 5.10's `map` and the like are `rethrows`,
not typed (`Swift6Shims.swift` gives what Swift 6 gives an iOS 16 app), and Xcode 26's compiler
is 6.2. An approximation that runs on every change; the device checks (DEVICE-TESTS.md, check
1) are what decides. Measured 2026-11-27: a `sending` violation planted in `Platform/` files is
reported as Linux's compiler reports it, and a real error a type-check had passed was found.
"""
import hashlib, os, re, shutil

SWIFT6_WILLTHROW = '''
@_silgen_name("swift_willThrowTypedImpl")
@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
@usableFromInline
internal func _willThrowTypedImpl<E>(_ error: E) where E : Swift.Error
@inlinable @_alwaysEmitIntoClient @_silgen_name("swift_willThrowTyped") public func _willThrowTyped<E>(_ error: E) where E : Swift.Error {
  if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
    _willThrowTypedImpl(error)
  }
}
'''

OBJC_INTRINSICS = '''
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _createCheckedContinuation<T>(_ continuation: __owned _Concurrency.UnsafeContinuation<T, Swift.Never>) -> _Concurrency.CheckedContinuation<T, Swift.Never> {
  return CheckedContinuation(continuation: continuation)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _createCheckedThrowingContinuation<T>(_ continuation: __owned _Concurrency.UnsafeContinuation<T, any Swift.Error>) -> _Concurrency.CheckedContinuation<T, any Swift.Error> {
  return CheckedContinuation(continuation: continuation)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _resumeCheckedContinuation<T>(_ continuation: _Concurrency.CheckedContinuation<T, Swift.Never>, _ value: sending T) {
  continuation.resume(returning: value)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _resumeCheckedThrowingContinuation<T>(_ continuation: _Concurrency.CheckedContinuation<T, any Swift.Error>, _ value: sending T) {
  continuation.resume(returning: value)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _resumeCheckedThrowingContinuationWithError<T>(_ continuation: _Concurrency.CheckedContinuation<T, any Swift.Error>, _ error: consuming any Swift.Error) {
  continuation.resume(throwing: error)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _resumeUnsafeContinuation<T>(_ continuation: _Concurrency.UnsafeContinuation<T, Swift.Never>, _ value: sending T) {
  continuation.resume(returning: value)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _resumeUnsafeThrowingContinuation<T>(_ continuation: _Concurrency.UnsafeContinuation<T, any Swift.Error>, _ value: sending T) {
  continuation.resume(returning: value)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@_alwaysEmitIntoClient internal func _resumeUnsafeThrowingContinuationWithError<T>(_ continuation: _Concurrency.UnsafeContinuation<T, any Swift.Error>, _ error: consuming any Swift.Error) {
  continuation.resume(throwing: error)
}
@available(macOS 10.15, iOS 13.0, watchOS 6.0, tvOS 13.0, *)
@usableFromInline
@_alwaysEmitIntoClient internal func _runTaskForBridgedAsyncMethod(@_inheritActorContext _ body: __owned @escaping @Sendable () async -> Swift.Void) {
  Task(operation: body)
}
@available(macOS 14.0, iOS 17.0, watchOS 10.0, tvOS 17.0, *)
@_silgen_name("swift_task_isOnExecutor")
public func _taskIsOnExecutor<Executor>(_ executor: Executor) -> Swift.Bool where Executor : _Concurrency.SerialExecutor
'''

IOS18 = '@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)'


def build(sdk, directory):
    """Writes the overlay for `sdk` into `directory`; returns it and a key of its contents (for
    the module cache built against it)."""
    toolchain = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("swiftc"))))
    linux = os.path.join(toolchain, "lib", "swift", "linux")
    sdk_swift = os.path.join(sdk, "usr", "lib", "swift")
    interface = lambda module: os.path.join(directory, module + ".swiftmodule", "arm64-apple-ios.swiftinterface")
    read = lambda path: open(path).read()
    write(interface("Observation"), observation(read(os.path.join(
        sdk_swift, "Observation.swiftmodule", "arm64-apple-ios.swiftinterface"))))
    swift = read(os.path.join(sdk_swift, "Swift.swiftmodule", "arm64-apple-ios.swiftinterface"))
    write(interface("Swift"), swift if "swift_willThrowTypedImpl" in swift else swift + SWIFT6_WILLTHROW)
    write(interface("_Concurrency"), concurrency(read(os.path.join(
        linux, "_Concurrency.swiftmodule", "x86_64-unknown-linux-gnu.swiftinterface"))))
    digest = hashlib.sha256()
    for module in ("Observation", "Swift", "_Concurrency"):
        digest.update(read(interface(module)).encode())
    return directory, digest.hexdigest()[:12]


def observation(text):
    name = "named(shouldNotifyObservers)"
    if name in text:
        return text
    patched = text.replace("named(withMutation))", "named(withMutation), %s)" % name)
    assert patched != text, "the SDK's @Observable declaration has an unexpected form"
    return patched


def concurrency(text):
    lines = text.split("\n")
    flags = next(i for i, l in enumerate(lines[:6]) if l.startswith("// swift-module-flags:"))
    lines[flags] = (lines[flags].replace("-target x86_64-unknown-linux-gnu", "-target arm64-apple-ios17.4")
                    .replace("-disable-objc-interop", "-enable-objc-interop").replace(" -static", ""))
    result = []
    for line in lines:  # bounded: one pass over the interface's lines
        stripped = line.strip()
        if stripped.startswith("@backDeployed("):
            continue
        if re.match(r"extension .* : Swift\.BitwiseCopyable \{\}$", stripped):
            if result and result[-1].strip().startswith("@available"):
                result.pop()
            continue
        if re.search(r"@_implements\(_Concurrency\.Async(Iterator|Sequence)(Protocol)?, Failure\)", stripped) \
                and result and result[-1].strip().startswith("@available"):
            result[-1] = re.sub(r"@available\(.*\)", IOS18, result[-1])
        result.append(line)
    return "\n".join(result) + OBJC_INTRINSICS


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.isfile(path) or open(path).read() != text:  # unchanged: the module cache stays warm
        with open(path, "w") as out:
            out.write(text)

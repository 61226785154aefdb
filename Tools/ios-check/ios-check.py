#!/usr/bin/env python3
"""`make ios-check`: type-checks, for iOS, every target an iOS app builds, and the sample apps.

    Tools/ios-check/ios-check.py [APP_PACKAGE_DIR...]

What an iOS app builds is the targets of this package's library products and the local
targets they depend on (C targets as module maps; `CLZ4`, a Linux system library, never), plus
the external modules they import (swift-log), taken from `.build/checkouts`. Each app package
given (e.g. `Samples/CourierSample.swiftpm`) contributes one module per `Sources/<Target>/`.

On Linux, against the SDK directory in `IOS_SDK` (an `iPhoneOS*.sdk`, as in Xcode; if unset,
the newest `/tmp/sdk/iPhoneOS*.sdk`), for `arm64-apple-ios$IOS_DEPLOYMENT_TARGET` (default
16.0), with `#if os(iOS)` / `canImport(UIKit)` code compiled in. The Linux toolchain lacks the
API notes Xcode's toolchain carries for `Dispatch` and `os`: `IOS_APINOTES` names a directory
holding them (`Dispatch.apinotes`, `os.apinotes`, from the Swift project's `apinotes/`
directory); if unset, the toolchain's own, else `$IOS_RES/apinotes` (default `/tmp/iosres`,
where an SDK set-up script may have left a Darwin resource directory).
Type-checking only: nothing is linked or run (see README, "Contributing without a Mac").

Exit status: 0 clean, 1 type errors, 2 no usable SDK or API notes (the message says which).
With `IOS_CHECK_OPTIONAL=1` (how CI calls it), a missing SDK or API notes is one line saying the
check was skipped, and exit 0: a machine without an iOS SDK never fails CI.
"""
import glob, json, os, re, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHIMS = os.path.join(HERE, "Swift6Shims.swift")
DEPLOYMENT = os.environ.get("IOS_DEPLOYMENT_TARGET", "16.0")
TRIPLE = "arm64-apple-ios" + DEPLOYMENT
# Swift 6 typed-throws inference through closures the SDK's Swift 5.10 standard library
# declares `rethrows` (Xcode 16's Swift 6 library declares them typed): errors of the old
# library, not of our code. Counted and reported, never hidden silently.
STDLIB_ARTIFACTS = [r"cannot assign value of type 'any Error' to type",
                    r"thrown expression type 'any Error' cannot be converted to error type"]
ERROR_LINE = re.compile(r"^\S.*: error: ")
IMPORT = re.compile(r"^\s*(?:@[\w()]+\s+)*(?:(?:public|package|internal|private|fileprivate)\s+)?"
                    r"import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_]\w*)", re.M)


def fail(status, message):
    print("ios-check: " + message)
    sys.exit(status)


def unavailable(message):
    """No SDK or API notes here: an error, or a skip when the check is optional."""
    if os.environ.get("IOS_CHECK_OPTIONAL") == "1":
        fail(0, "skipped, " + message + " (README: Contributing without a Mac)")
    fail(2, message)


def swift_files(directory):
    return sorted(f for f in glob.glob(os.path.join(directory, "**", "*.swift"), recursive=True))


def imported_modules(files):
    modules = set()
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as source:
            modules.update(IMPORT.findall(source.read()))
    return modules


def resource_dir(scratch):
    """The toolchain's shims and clang headers, plus Dispatch and os API notes."""
    toolchain = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("swiftc"))))
    candidates = [os.environ.get("IOS_APINOTES"), os.path.join(toolchain, "lib", "swift", "apinotes"),
                  os.path.join(os.environ.get("IOS_RES", "/tmp/iosres"), "apinotes")]
    has_notes = lambda d: all(os.path.isfile(os.path.join(d, n)) for n in ("Dispatch.apinotes", "os.apinotes"))
    notes = next((d for d in candidates if d and has_notes(d)), candidates[0] or candidates[1])
    if not has_notes(notes):
        unavailable("no Dispatch.apinotes and os.apinotes in %s: set IOS_APINOTES to a directory holding them "
                    "(the Swift project's apinotes/ directory; Xcode's toolchain ships them, Linux's does not)" % notes)
    res = os.path.join(scratch, "resources")
    os.makedirs(res)
    os.symlink(os.path.join(toolchain, "lib", "swift", "shims"), os.path.join(res, "shims"))
    os.symlink(os.path.realpath(os.path.join(toolchain, "lib", "swift", "clang")), os.path.join(res, "clang"))
    os.symlink(os.path.abspath(notes), os.path.join(res, "apinotes"))
    return res


def ios_targets(description):
    """Targets of the library products, closed over local dependencies, in dependency order."""
    targets = {t["name"]: t for t in description["targets"]}
    ordered, seen = [], set()

    def visit(name, depth=0):
        assert depth < len(targets), "cycle in target dependencies"
        if name in seen:
            return
        seen.add(name)
        for dependency in targets[name].get("target_dependencies", []):
            visit(dependency, depth + 1)
        ordered.append(targets[name])

    for product in description["products"]:
        if "library" in product["type"]:
            for name in product["targets"]:
                visit(name)
    return ordered


class Checker:
    def __init__(self, sdk, scratch):
        self.out = os.path.join(scratch, "modules")
        os.makedirs(self.out)
        self.cache = os.path.join(scratch, "module-cache")
        self.base = ["-target", TRIPLE, "-sdk", sdk, "-resource-dir", resource_dir(scratch),
                     "-module-cache-path", self.cache, "-I", self.out, "-D", "SWIFT_PACKAGE"]
        self.external = {os.path.basename(d): d for d in glob.glob(".build/checkouts/*/Sources/*") if swift_files(d)}
        self.built = set()
        self.failed = set()
        self.artifacts = 0

    def add_c_module(self, target):
        headers = glob.glob(os.path.join(os.path.abspath(target["path"]), "include", "*.h"))
        with open(os.path.join(self.out, "module.modulemap"), "a") as modulemap:
            for header in headers:
                modulemap.write('module %s { header "%s" export * }\n' % (target["name"], header))

    def build_external(self, name, depth=0):
        """An interface (no bodies) of a dependency's module, in its own Swift 5 mode. The
        modules it imports are tried first, quietly: an import under `#if` may never be built."""
        assert depth < 32, "import chain too deep"
        if name in self.built:
            return True
        if name not in self.external:
            fail(1, "module %s is not in .build/checkouts (run swift package resolve)" % name)
        files = swift_files(self.external[name])
        for module in sorted(imported_modules(files)):
            if module in self.external and module != name and depth == 0:
                self.build_external(module, depth + 1)
        package = re.sub(r"\W", "_", self.external[name].split(os.sep)[2])
        result = subprocess.run(["swiftc", "-frontend", "-emit-module", "-experimental-skip-all-function-bodies"]
                                + self.base + ["-swift-version", "5", "-package-name", package, "-parse-as-library",
                                               "-module-name", name] + files
                                + ["-o", os.path.join(self.out, name + ".swiftmodule")], capture_output=True, text=True)
        if result.returncode != 0:
            if depth > 0:
                return False
            first = next((l for l in result.stderr.splitlines() if "error:" in l), result.stderr[-300:])
            fail(1, "dependency %s does not build for iOS: %s" % (name, first))
        self.built.add(name)
        return True

    def check(self, name, files, external_dependencies=()):
        """Type-checks one module, then emits its interface for the modules that import it."""
        for module in external_dependencies:
            self.build_external(module)
        broken = sorted(imported_modules(files) & self.failed)
        if broken:
            print("%s: not checked (it imports %s, which has errors)" % (name, ", ".join(broken)))
            self.failed.add(name)
            return False
        flags = self.base + ["-swift-version", "6", "-parse-as-library", "-module-name", name] + files + [SHIMS]
        result = subprocess.run(["swiftc", "-typecheck"] + flags, capture_output=True, text=True)
        errors = sorted(set(l for l in result.stderr.splitlines() if ERROR_LINE.match(l)))
        real = [e for e in errors if not any(re.search(a, e) for a in STDLIB_ARTIFACTS)]
        self.artifacts += len(errors) - len(real)
        for error in errors:
            if error not in real:
                print("  ignored (Swift 5.10 standard library): " + error.replace(os.getcwd() + "/", ""))
        if real or (result.returncode != 0 and not errors):
            self.failed.add(name)
            print("%s: %d errors" % (name, len(real) or 1))
            crash = [l[:300] for l in result.stderr.splitlines() if re.match(r"\s*\d+\.\s", l) or "error:" in l][:8]
            for error in real[:20] or crash or result.stderr.splitlines()[:10]:
                print("  " + error.replace(os.getcwd() + "/", ""))
            return False
        subprocess.run(["swiftc", "-frontend", "-emit-module", "-experimental-skip-all-function-bodies"] + flags
                       + ["-o", os.path.join(self.out, name + ".swiftmodule")], capture_output=True)
        print("%s: type-checks for %s (%d files)" % (name, TRIPLE, len(files)))
        return True


def main(apps):
    sdk = os.environ.get("IOS_SDK") or (sorted(glob.glob("/tmp/sdk/iPhoneOS*.sdk")) or [""])[-1]
    if not os.path.isfile(os.path.join(sdk, "SDKSettings.json")):
        unavailable("no iOS SDK: IOS_SDK=%r is not an iPhoneOS*.sdk directory holding SDKSettings.json" % sdk)
    if not os.path.isdir(".build/checkouts"):
        subprocess.run(["swift", "package", "resolve"], capture_output=True, check=True)
    description = json.loads(subprocess.run(["swift", "package", "describe", "--type", "json"],
                                            capture_output=True, text=True, check=True).stdout)
    scratch = tempfile.mkdtemp(prefix="ios-check.")
    try:
        checker = Checker(sdk, scratch)
        clean, count = True, 0
        for target in ios_targets(description):
            if target["module_type"] == "ClangTarget":
                checker.add_c_module(target)
            elif target["module_type"] == "SwiftTarget":
                files = sorted(os.path.join(target["path"], f) for f in target["sources"])
                # Product names stand for module names: true of every package Courier uses.
                clean = checker.check(target["name"], files, target.get("product_dependencies", [])) and clean
                count += 1
            # A system library (CLZ4, liblz4 on Linux) is never built for iOS: Apple platforms
            # take LZ4 blocks from the Compression framework.
        for app in apps:
            for source in sorted(glob.glob(os.path.join(app, "Sources", "*"))):
                clean = checker.check(os.path.basename(source), swift_files(source)) and clean
                count += 1
        sdk_name = os.path.normpath(sdk)
        print("ios-check: %s — %d modules type-checked for %s against %s (%d errors of the SDK's Swift 5.10 "
              "standard library ignored; nothing linked or run)"
              % ("clean" if clean else "ERRORS", count, TRIPLE, sdk_name, checker.artifacts))
        return 0 if clean else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

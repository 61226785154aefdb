#!/usr/bin/env python3
"""`make ios-check`: compiles for iOS, as far as SIL's diagnostics (type-checking, then Swift 6's
data-race, exclusivity and definite-initialization checks), every target an iOS app builds and
the sample apps.

    Tools/ios-check/ios-check.py [APP_DIR...]

What an iOS app builds is the targets of this package's library products and the local
targets they depend on (C targets and system libraries as module maps; `CLZ4`, a Linux system
library, never), plus the external modules they import (swift-log), taken from `.build/checkouts`.
Each app directory given contributes its own modules: one holding an Xcode project (`Samples/CourierSample`) one
per target, its Swift files as the project's synchronized folders give them (read with
`Tools/xcodeproj-check/pbxproj.py`), for the target's deployment target, an app extension's as
an extension builds it (`-application-extension`, Debug and Release); an app package
(`Tools/doc-examples/ios`) one per `Sources/<Target>/`. A unit-test target needs XCTest, which
Xcode keeps beside the SDK (Platforms/iPhoneOS.platform/Developer/Library/Frameworks), not in
it: it is checked against `XCTestShim.swift`, the app it tests emitted with `-enable-testing`.

On Linux, against the SDK directory in `IOS_SDK` (an `iPhoneOS*.sdk`, as in Xcode; if unset,
the newest `/tmp/sdk/iPhoneOS*.sdk`), for `arm64-apple-ios$IOS_DEPLOYMENT_TARGET` (default
16.0), with `#if os(iOS)` / `canImport(UIKit)` code compiled in. The Linux toolchain lacks the
API notes Xcode's toolchain carries for `Dispatch` and `os`: `IOS_APINOTES` names a directory
holding them (`Dispatch.apinotes`, `os.apinotes`, from the Swift project's `apinotes/`
directory); if unset, the toolchain's own, else `$IOS_RES/apinotes` (default `/tmp/iosres`,
where an SDK set-up script may have left a Darwin resource directory).
Past type-checking the Linux compiler needs the SDK's `Swift`, `_Concurrency` and `Observation`
as Swift 6 declares them: `overlay.py` builds them (and says why each). Nothing is generated,
linked or run (see README, "Contributing without a Mac").

Three rules keep the check sound (../shared/ios/README.md):
- It ignores no error: when the compiler reports an error in some paths, it reports nothing
  after it in that module, so one ignored error can hide every later one.
- `Swift6Shims.swift` declares only what Swift 6's standard library really gives an app built
  for this deployment target, with the availability the real declaration has.
- A module type-checks only if the compiler exited 0 for it, and its interface was emitted
  (the modules that import it need it); a crash or a missing interface is a failure, with its
  cause printed.

Each module is checked twice, as Xcode builds it: the Debug configuration (`-D DEBUG`, the
code inside `#if DEBUG` compiled in) and Release. The SDK's module cache is kept in
`.build/ios-check/` between runs (`IOS_MODULE_CACHE` to move it): the first run builds it, and
later runs take about a third of its time.

Exit status: 0 clean, 1 errors, 2 no usable SDK or API notes (the message says which).
With `IOS_CHECK_OPTIONAL=1` (how CI calls it), a missing SDK or API notes is one line saying the
check was skipped, and exit 0: a machine without an iOS SDK never fails CI.
"""
import glob, importlib.util, json, os, re, shutil, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("pbxproj", os.path.join(HERE, "..", "xcodeproj-check", "pbxproj.py"))
pbxproj = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pbxproj)
_spec = importlib.util.spec_from_file_location("overlay", os.path.join(HERE, "overlay.py"))
overlay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(overlay)
SHIMS = os.path.join(HERE, "Swift6Shims.swift")
XCTEST_SHIM = os.path.join(HERE, "XCTestShim.swift")
DEPLOYMENT = os.environ.get("IOS_DEPLOYMENT_TARGET", "16.0")
TRIPLE = "arm64-apple-ios" + DEPLOYMENT
# As SwiftPM does, so that `package` declarations are visible across this package's modules.
PACKAGE_NAME = "courier"
CONFIGURATIONS = [("Debug", ["-D", "DEBUG"]), ("Release", [])]
# The package's modules also as an app extension builds them (Xcode compiles a package linked
# into an extension with `-application-extension`): an API an extension may not call, such as
# `UIApplication.shared`, must sit behind `@available(iOSApplicationExtension, unavailable)`.
EXTENSION = ("Release in an app extension", ["-application-extension"])
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
    os.makedirs(res, exist_ok=True)
    links = {"shims": os.path.join(toolchain, "lib", "swift", "shims"),
             "clang": os.path.realpath(os.path.join(toolchain, "lib", "swift", "clang")), "apinotes": os.path.abspath(notes)}
    for name, target in links.items():
        link = os.path.join(res, name)
        if os.path.islink(link) and os.readlink(link) == target:
            continue  # unchanged: a new link would make every cached module stale
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)
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
        """`scratch` holds the resource directory and the modules a run emits. Its path and
        files are part of what keys the module cache: kept at a fixed path, and rewritten only
        when they change, they let runs share the cache (about 1 minute to build)."""
        self.out = os.path.join(scratch, "modules")
        os.makedirs(self.out, exist_ok=True)
        for emitted in glob.glob(os.path.join(self.out, "*.swift*")):
            os.remove(emitted)
        self.modulemap = []
        # Searched before the SDK: its Observation, Swift and _Concurrency as Swift 6 declares
        # them, so that SIL's diagnostic passes run (overlay.py says why each).
        overlay_dir, overlay_key = overlay.build(sdk, os.path.join(scratch, "overlay"))
        # One cache per overlay: a cached SDK module records the SDK's interfaces it was built
        # from, not the overlay's that replaced them, so a cache built against another overlay
        # (or none) looks fresh and is not (measured: the compiler aborts deserializing SIL).
        caches = os.environ.get("IOS_MODULE_CACHE") or os.path.normpath(os.path.join(scratch, "..", "module-caches"))
        self.cache = os.path.join(caches, overlay_key)
        for stale in glob.glob(os.path.join(caches, "*")):  # another overlay's: this SDK's or compiler's no more
            if stale != self.cache:
                shutil.rmtree(stale, ignore_errors=True)
        self.base = ["-target", TRIPLE, "-sdk", sdk, "-resource-dir", resource_dir(scratch),
                     "-module-cache-path", self.cache, "-I", self.out, "-D", "SWIFT_PACKAGE", "-I", overlay_dir]
        # The driver finds the compiler's macro plugins (`@Observable`) by itself; a frontend
        # run (`-emit-module` below) is told where they are.
        toolchain = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("swiftc"))))
        self.base += ["-plugin-path", os.path.join(toolchain, "lib", "swift", "host", "plugins")]
        self.external = {os.path.basename(d): d for d in glob.glob(".build/checkouts/*/Sources/*") if swift_files(d)}
        self.built = set()
        self.failed = set()

    def add_c_module(self, name, headers):
        """A C target, as a module of the map the Swift modules find in `-I out`."""
        self.modulemap += ['module %s { header "%s" export * }\n' % (name, os.path.realpath(h)) for h in headers]
        path, text = os.path.join(self.out, "module.modulemap"), "".join(self.modulemap)
        if not os.path.isfile(path) or open(path).read() != text:
            with open(path, "w") as modulemap:
                modulemap.write(text)

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

    def check(self, name, files, external_dependencies=(), triple=None, app_extension=False):
        """Type-checks one module in each configuration (for `triple`, default the package's; an
        app extension's own module as Xcode compiles it, extension-safe in each), then emits its
        interface for the modules that import it. Clean only if every compiler run exited 0."""
        for module in external_dependencies:
            self.build_external(module)
        broken = sorted(imported_modules(files) & self.failed)
        if broken:
            print("%s: not checked (it imports %s, which has errors)" % (name, ", ".join(broken)))
            self.failed.add(name)
            return False
        in_package, triple = triple is None, triple or TRIPLE
        base = [triple if flag == TRIPLE else flag for flag in self.base]
        flags = base + ["-swift-version", "6", "-package-name", PACKAGE_NAME, "-parse-as-library",
                        "-module-name", name] + files + [SHIMS]
        # An app's modules are built once, as the app or as its extension; the package's modules
        # may go into either, so they get the third run.
        runs = CONFIGURATIONS + ([EXTENSION] if in_package else [])
        if app_extension:
            runs = [("%s app extension" % configuration, defines + EXTENSION[1]) for configuration, defines in runs]
        for configuration, defines in runs:
            # One frontend for the whole module (-wmo): per-file jobs each load the SDK anew.
            # Past type-checking: SILGen and the mandatory passes, Swift 6's data-race checks
            # (region isolation, `sending`) and exclusivity among them; no code is generated.
            result = subprocess.run(["swiftc", "-emit-sil", "-wmo", "-o", os.devnull] + defines + flags,
                                    capture_output=True, text=True)
            if result.returncode != 0:
                return self.report(name, "%s configuration" % configuration, result)
        module = os.path.join(self.out, name + ".swiftmodule")
        # `make docs` on Linux: the package's symbol graphs as iOS sees them (the Apple-only API
        # included), for DocC.
        graphs = os.environ.get("IOS_SYMBOL_GRAPH_DIR")
        symbol_graph = ["-emit-symbol-graph", "-emit-symbol-graph-dir", graphs] if graphs and in_package else []
        # An app's module as its Debug build has it, for its tests' `@testable import`.
        testing = [] if in_package else ["-enable-testing"]
        result = subprocess.run(["swiftc", "-frontend", "-emit-module", "-experimental-skip-all-function-bodies"]
                                + flags + symbol_graph + testing + ["-o", module], capture_output=True, text=True)
        if result.returncode != 0 or not os.path.isfile(module):
            return self.report(name, "its interface could not be emitted", result)
        extension = ", and as an app extension builds it" if in_package else ""
        extension = ", as an app extension" if app_extension else extension
        print("%s: clean through SIL's diagnostics for %s, Debug and Release%s (%d files)"
              % (name, triple, extension, len(files)))
        return True

    def build_xctest_shim(self, triple):
        """Module `XCTest` from XCTestShim.swift, for a test target's type-check."""
        base = [triple if flag == TRIPLE else flag for flag in self.base]
        result = subprocess.run(["swiftc", "-frontend", "-emit-module", "-experimental-skip-all-function-bodies"]
                                + base + ["-swift-version", "6", "-parse-as-library", "-module-name", "XCTest",
                                          XCTEST_SHIM, "-o", os.path.join(self.out, "XCTest.swiftmodule")],
                                capture_output=True, text=True)
        return result.returncode == 0 or self.report("XCTest (the shim)", "it does not build", result)

    def report(self, name, what, result):
        """A failed compiler run: every error it printed, by file and line, or why it stopped."""
        self.failed.add(name)
        errors = sorted(set(l for l in result.stderr.splitlines() if ERROR_LINE.match(l)))
        print("%s: %s: %s" % (name, what, "%d errors" % len(errors) if errors
                                 else "the compiler exited %d without naming an error" % result.returncode))
        # A crash names no error: its stack dump's numbered frames and last lines say where.
        crash = [l[:300] for l in result.stderr.splitlines() if re.match(r"\s*\d+\.\s", l)][:8]
        for line in errors or crash or result.stderr.splitlines()[-10:]:
            print("  " + line.replace(os.getcwd() + "/", ""))
        return False


def main(apps):
    sdk = os.environ.get("IOS_SDK") or (sorted(glob.glob("/tmp/sdk/iPhoneOS*.sdk")) or [""])[-1]
    if not os.path.isfile(os.path.join(sdk, "SDKSettings.json")):
        unavailable("no iOS SDK: IOS_SDK=%r is not an iPhoneOS*.sdk directory holding SDKSettings.json" % sdk)
    # Real path: a copy of the package that links `.build` here (a mutation run) shares it.
    scratch = os.path.join(os.path.realpath(".build"), "ios-check", "scratch")
    checker = Checker(sdk, scratch)
    clean, count = True, 0
    for name, kind, files, products, triple, app_extension in modules(apps):
        if kind == "c":
            checker.add_c_module(name, files)
        elif kind == "xctest":
            # XCTest sits beside the SDK in Xcode, not in it: the tests see XCTestShim.swift's
            # declarations of what they use, and `@testable import` the app (emitted for testing).
            clean = checker.build_xctest_shim(triple) and checker.check(name, files, products, triple) and clean
            count += 1
        elif name in TRUSTED:
            # `make ios-check-mutations` only: a module its mutation cannot reach was
            # checked clean by its baseline run, whose interface stands in.
            for module in [name] + [p for p in products if p not in checker.built]:
                shutil.copy(os.path.join(os.environ["IOS_CHECK_INTERFACES"], module + ".swiftmodule"), checker.out)
            checker.built.update(products)
            print("%s: unchanged since the clean baseline run (its interface reused)" % name)
        else:
            clean = checker.check(name, files, products, triple, app_extension) and clean
            count += 1
    if os.environ.get("IOS_CHECK_SAVE") and clean:
        for module in glob.glob(os.path.join(checker.out, "*.swiftmodule")):
            shutil.copy(module, os.environ["IOS_CHECK_SAVE"])
    print("ios-check: %s — %d modules checked through SIL's diagnostics for %s against %s, Debug and Release, "
          "the package's also as an app extension builds it (0 errors ignored; nothing linked or run)"
          % ("clean" if clean else "ERRORS", count, TRIPLE, os.path.normpath(sdk)))
    return 0 if clean else 1


# System libraries that the package uses on Linux only (Package.swift's platform conditions).
LINUX_ONLY = {"CLZ4"}

# Modules a mutation run takes from its baseline instead of checking (ios-check-mutations.py).
TRUSTED = set(filter(None, os.environ.get("IOS_CHECK_TRUSTED", "").split(",")))


def package_description():
    """`swift package describe`, or the copy `IOS_CHECK_DESCRIPTION` names (mutation runs)."""
    if os.environ.get("IOS_CHECK_DESCRIPTION"):
        with open(os.environ["IOS_CHECK_DESCRIPTION"]) as described:
            return json.load(described)
    if not os.path.isdir(".build/checkouts"):
        subprocess.run(["swift", "package", "resolve"], capture_output=True, check=True)
    return json.loads(subprocess.run(["swift", "package", "describe", "--type", "json"],
                                     capture_output=True, text=True, check=True).stdout)


def modules(apps):
    """What an iOS app builds, in dependency order: (name, "c", "swift" or "xctest", files, the
    products it uses, its triple (None: the package's), whether it is an app extension). Files
    are relative to the package root, as errors print them."""
    found = []
    for target in ios_targets(package_description()):
        path = os.path.relpath(target["path"])
        if target["module_type"] == "ClangTarget":
            found.append((target["name"], "c", glob.glob(os.path.join(path, "include", "*.h")), [], None, False))
        elif target["module_type"] == "SwiftTarget":
            # Product names stand for module names: true of every package Courier uses.
            found.append((target["name"], "swift", sorted(os.path.join(path, f) for f in target["sources"]),
                          target.get("product_dependencies", []), None, False))
        elif target["module_type"] == "SystemLibraryTarget" and target["name"] not in LINUX_ONLY:
            # The system's own library (CZlib: the SDK's zlib.h), through the target's shim.
            found.append((target["name"], "c", [os.path.join(path, "shim.h")], [], None, False))
        # CLZ4 (liblz4 on Linux) is never built for iOS: Apple platforms take LZ4 blocks from
        # the Compression framework.
    for app in apps:
        projects = glob.glob(os.path.join(app, "*.xcodeproj"))
        if projects:
            found += project_modules(projects[0])
            continue
        triple = app_triple(app)
        for source in sorted(glob.glob(os.path.join(app, "Sources", "*"))):
            found.append((os.path.basename(source), "swift", swift_files(source), [], triple, False))
    return found


def project_modules(path):
    """An Xcode project's targets, in the project's order (the app before the tests that import
    it): each target's module name, its Swift files, and its Release deployment target."""
    project, found = pbxproj.Project(path), []
    for name, target in project.targets().items():
        settings = project.settings(target, "Release")
        module = re.sub(r"\W", "_", settings.get("PRODUCT_MODULE_NAME") or settings.get("PRODUCT_NAME") or name)
        triple = TRIPLE.replace("ios" + DEPLOYMENT, "ios" + settings.get("IPHONEOS_DEPLOYMENT_TARGET", DEPLOYMENT))
        product = target.get("productType", "")
        files = [os.path.relpath(f) for f in project.swift_files(target)]
        found.append((module, "xctest" if product.endswith("unit-test") else "swift", files, [], triple,
                      product.endswith("app-extension")))
    return found


def app_triple(app):
    """The triple for an app package's own sources: its manifest's iOS version (`.iOS("17.0")`
    or `.iOS(.v17)`), if it names one; else the package's."""
    manifest = open(os.path.join(app, "Package.swift")).read()
    match = re.search(r'\.iOS\(\s*(?:"(\d+(?:\.\d+)?)"|\.v(\d+)(?:_(\d+))?)\s*\)', manifest)
    if not match:
        return TRIPLE
    version = match.group(1) or "%s.%s" % (match.group(2), match.group(3) or "0")
    return TRIPLE.replace("ios" + DEPLOYMENT, "ios" + version)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

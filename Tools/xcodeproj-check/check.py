#!/usr/bin/env python3
"""`make xcodeproj-check`: the iOS device kit's Xcode project, checked without Xcode.

    Tools/xcodeproj-check/check.py PROJECT.xcodeproj              # the checks; exit 1 on a problem
    Tools/xcodeproj-check/check.py --self-test PROJECT.xcodeproj  # broken copies must fail

Nobody builds this repository on a Mac, so a project Xcode would refuse (a dangling object id,
an extension built but never embedded, two App Groups that differ) would go unnoticed until
someone's first build. This reads `project.pbxproj` (an OpenStep property list: `parse`) and
the files it names, and fails, saying what and where, unless:

- every object id referenced exists, and the format is Xcode 16's (objectVersion 77);
- the targets CourierSample (app), ShareExtension (app extension) and CourierSampleTests (unit
  tests hosted by the app) exist, each on its folders (synchronized groups) on disk;
- the app embeds the extension (a copy-files phase to PlugIns, dstSubfolderSpec 13) and
  depends on it; the tests depend on the app and run in it;
- the app and the extension link CourierKit from the local package at ../.. (this repository),
  and the tests do not (they take it from the app they run in);
- each target's entitlements and Info.plist exist; the extension's bundle id extends the
  app's; both entitlements name one App Group, the one `SharedContainer.appGroup` names;
- the app's Info.plist has the background, ATS and local-network keys, and its task
  identifier is `AppDelegate.delivery`; the extension's names a share extension's principal
  class that exists;
- every target builds for iOS 17.0 in Swift 6; the shared scheme builds the app and tests.

The project is read by `pbxproj.py`. Python 3 standard library.
"""
import os, plistlib, re, shutil, sys, tempfile

from pbxproj import OBJECT_ID, Project, ProjectError

APP, EXTENSION, TESTS = "CourierSample", "ShareExtension", "CourierSampleTests"
PRODUCT_TYPES = {APP: "com.apple.product-type.application", EXTENSION: "com.apple.product-type.app-extension",
                 TESTS: "com.apple.product-type.bundle.unit-test"}
DEPLOYMENT_TARGET, SWIFT_VERSIONS = "17.0", ("6", "6.0")
INFO_KEYS = ("BGTaskSchedulerPermittedIdentifiers", "UIBackgroundModes", "NSAppTransportSecurity",
             "NSLocalNetworkUsageDescription")


def references(value):
    """Every object id a value refers to (keys of dictionaries such as TargetAttributes too)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if OBJECT_ID.match(key):
                yield key
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)
    elif OBJECT_ID.match(value):
        yield value


def check_objects(project):
    problems = []
    if project.plist.get("objectVersion") != "77":
        problems.append("objectVersion is %s: Xcode 16's format (synchronized folders) is 77"
                        % project.plist.get("objectVersion"))
    if project.project.get("isa") != "PBXProject":
        problems.append("rootObject names no PBXProject")
    for owner, body in project.objects.items():
        for missing in sorted(set(references(body)) - set(project.objects)):
            problems.append("%s (%s) refers to %s, which is not an object" % (owner, body.get("isa"), missing))
    return problems


def check_targets(project):
    problems, targets = [], project.targets()
    for name, product_type in PRODUCT_TYPES.items():
        if name not in targets:
            problems.append("no target %s" % name)
        elif targets[name].get("productType") != product_type:
            problems.append("%s is a %s, not a %s" % (name, targets[name].get("productType"), product_type))
        else:
            for folder, _ in project.folders(targets[name]):
                if not os.path.isdir(folder):
                    problems.append("%s's folder %s is not on disk" % (name, os.path.relpath(folder)))
            if not project.swift_files(targets[name]):
                problems.append("%s has no Swift source in its folders" % name)
    if problems:
        return problems
    app, extension = targets[APP], targets[EXTENSION]
    product = extension.get("productReference")
    embedded = [phase for phase in map(project.objects.get, app.get("buildPhases", []))
                if phase and phase.get("isa") == "PBXCopyFilesBuildPhase" and phase.get("dstSubfolderSpec") == "13"
                and any(project.objects.get(f, {}).get("fileRef") == product for f in phase.get("files", []))]
    if not embedded:
        problems.append("%s does not embed %s: no copy-files phase to PlugIns (dstSubfolderSpec 13) copies its "
                        "product, so the app would ship without it" % (APP, EXTENSION))
    for dependent, dependency in ((APP, EXTENSION), (TESTS, APP)):
        wanted = project.target_id(dependency)
        found = [project.objects.get(d, {}).get("target") for d in targets[dependent].get("dependencies", [])]
        if wanted not in found:
            problems.append("%s does not depend on %s" % (dependent, dependency))
    for configuration in ("Debug", "Release"):
        host = project.settings(targets[TESTS], configuration).get("TEST_HOST", "")
        if "/%s.app/" % APP not in host:
            problems.append("%s (%s) does not run in %s.app: TEST_HOST is %r" % (TESTS, configuration, APP, host))
    return problems


def check_package(project):
    problems, targets = [], project.targets()
    for name in (APP, EXTENSION, TESTS):
        linked = []
        for dependency in map(project.objects.get, targets[name].get("packageProductDependencies", [])):
            package = project.objects.get((dependency or {}).get("package"), {})
            if dependency and dependency.get("productName") == "CourierKit":
                linked.append(package)
        if name == TESTS:
            if linked:
                problems.append("%s links CourierKit: a second static copy beside the app's, in the same process"
                                % TESTS)
            continue
        local = [p for p in linked if p.get("isa") == "XCLocalSwiftPackageReference"
                 and p.get("relativePath") == "../.."]
        if not local:
            problems.append("%s does not take CourierKit from the local package at ../.." % name)
        phases = [project.objects.get(p, {}) for p in targets[name].get("buildPhases", [])]
        built = [project.objects.get(f, {}).get("productRef") for phase in phases
                 if phase.get("isa") == "PBXFrameworksBuildPhase" for f in phase.get("files", [])]
        if not set(built) & set(targets[name].get("packageProductDependencies", [])):
            problems.append("%s does not link CourierKit: its Frameworks phase has no entry for it" % name)
        manifest = os.path.join(project.root, "..", "..", "Package.swift")
        if not os.path.isfile(manifest) or '.library(name: "CourierKit"' not in open(manifest).read():
            problems.append("../.. from %s holds no Package.swift with a CourierKit library" % project.root)
    return sorted(set(problems))


def read_plist(project, relative, what):
    path = os.path.join(project.root, relative)
    try:
        with open(path, "rb") as source:
            return plistlib.load(source)
    except (OSError, plistlib.InvalidFileException, ValueError) as error:
        raise ProjectError("%s %s does not parse: %s" % (what, relative, error)) from None


def check_settings(project):
    problems, targets, groups = [], project.targets(), {}
    for name, target in targets.items():
        for configuration in ("Debug", "Release"):
            settings = project.settings(target, configuration)
            where = "%s (%s)" % (name, configuration)
            if settings.get("IPHONEOS_DEPLOYMENT_TARGET") != DEPLOYMENT_TARGET:
                problems.append("%s: IPHONEOS_DEPLOYMENT_TARGET is %s, not %s (the model needs iOS 17)"
                                % (where, settings.get("IPHONEOS_DEPLOYMENT_TARGET"), DEPLOYMENT_TARGET))
            if settings.get("SWIFT_VERSION") not in SWIFT_VERSIONS:
                problems.append("%s: SWIFT_VERSION is %s, not 6" % (where, settings.get("SWIFT_VERSION")))
            if name == TESTS:
                continue  # generated Info.plist, no entitlements
            for key in ("CODE_SIGN_ENTITLEMENTS", "INFOPLIST_FILE"):
                if not os.path.isfile(os.path.join(project.root, settings.get(key, ""))):
                    problems.append("%s: %s %r is not a file" % (where, key, settings.get(key)))
                elif key == "CODE_SIGN_ENTITLEMENTS":
                    read = read_plist(project, settings[key], "entitlements")
                    groups[where] = tuple(read.get("com.apple.security.application-groups") or ())
    app_id = project.settings(targets[APP], "Release").get("PRODUCT_BUNDLE_IDENTIFIER", "")
    extension_id = project.settings(targets[EXTENSION], "Release").get("PRODUCT_BUNDLE_IDENTIFIER", "")
    if not app_id or "$(" in app_id or not extension_id.startswith(app_id + "."):
        problems.append("%s's bundle id %r does not extend %s's %r (iOS requires it)"
                        % (EXTENSION, extension_id, APP, app_id))
    constant = project.source_constant(targets[APP], "appGroup")
    named = set(groups.values())
    if len(named) != 1 or len(next(iter(named))) != 1:
        problems.append("the entitlements do not name one and the same App Group: %s" % groups)
    elif next(iter(named))[0] != constant:
        problems.append("the entitlements' App Group %r is not SharedContainer.appGroup %r"
                        % (next(iter(named))[0], constant))
    if project.source_constant(targets[EXTENSION], "appGroup") != constant:
        problems.append("%s's sources name another App Group than %s's" % (EXTENSION, APP))
    return problems


def check_info(project):
    problems, targets = [], project.targets()
    info = read_plist(project, project.settings(targets[APP], "Release")["INFOPLIST_FILE"], "Info.plist")
    for key in INFO_KEYS:
        if not info.get(key):
            problems.append("%s's Info.plist has no %s" % (APP, key))
    if "processing" not in info.get("UIBackgroundModes", []):
        problems.append("%s's UIBackgroundModes lacks processing (the BGProcessingTask)" % APP)
    if info.get("NSAppTransportSecurity", {}).get("NSAllowsLocalNetworking") is not True:
        problems.append("%s's NSAppTransportSecurity does not allow local networking" % APP)
    delivery = project.source_constant(targets[APP], "delivery")
    if delivery not in info.get("BGTaskSchedulerPermittedIdentifiers", []):
        problems.append("AppDelegate.delivery %r is not in BGTaskSchedulerPermittedIdentifiers" % delivery)
    extension = read_plist(project, project.settings(targets[EXTENSION], "Release")["INFOPLIST_FILE"], "Info.plist")
    attributes = extension.get("NSExtension", {})
    if attributes.get("NSExtensionPointIdentifier") != "com.apple.share-services":
        problems.append("%s's Info.plist is not a share extension's" % EXTENSION)
    principal = attributes.get("NSExtensionPrincipalClass", "").split(".")[-1]
    sources = "".join(open(p, encoding="utf-8").read() for p in project.swift_files(targets[EXTENSION]))
    if not principal or not re.search(r"\bclass %s\b" % re.escape(principal), sources):
        problems.append("%s's principal class %r is not a class in its sources" % (EXTENSION, principal))
    for name in (APP, EXTENSION):
        folder, excluded = next(f for f in project.folders(targets[name]) if os.path.basename(f[0]) == name)
        read_plist(project, os.path.join(folder, "PrivacyInfo.xcprivacy"), "privacy manifest")
        for kept_out in ("Info.plist", name + ".entitlements"):
            if kept_out not in excluded:
                problems.append("%s's folder copies %s into the bundle: list it in the folder's exceptions"
                                % (name, kept_out))
    return problems


def check_scheme(project):
    path = os.path.join(project.path, "xcshareddata", "xcschemes", APP + ".xcscheme")
    if not os.path.isfile(path):
        return ["no shared scheme %s: a fresh clone would have none to build or test"
                % os.path.relpath(path, project.root)]
    text = open(path, encoding="utf-8").read()
    return ["the shared scheme does not name %s (%s)" % (name, project.target_id(name))
            for name in (APP, TESTS) if 'BlueprintIdentifier = "%s"' % project.target_id(name) not in text]


def check(path):
    """Every problem found, in words; empty when the project is sound."""
    try:
        project = Project(path)
        problems = check_objects(project)
        for step in (check_targets, check_package, check_settings, check_info, check_scheme):
            if problems:
                break
            problems = step(project)
        return problems
    except (OSError, ProjectError, KeyError) as error:
        return ["%s: %s" % (type(error).__name__, error)]


# Broken copies for --self-test: what is broken, the file edited (relative to the folder that
# holds the project), the edit, and words the failure must say.
LOCAL_NETWORK = "\t<key>NSLocalNetworkUsageDescription</key>\n"
MUTATIONS = [
    ("the embed phase copies elsewhere", "pbxproj",
     lambda t: t.replace("dstSubfolderSpec = 13;", "dstSubfolderSpec = 16;"), "does not embed"),
    ("an object removed, still referenced", "pbxproj",
     lambda t: re.sub(r"\t\t\w{24} /\* PBXContainerItemProxy \*/ = \{.*?\n\t\t\};\n", "", t, count=1, flags=re.S),
     "which is not an object"),
    ("the app no longer depends on the extension", "pbxproj",
     lambda t: re.sub(r"(dependencies = \(\n)\t\t\t\t\w{24} /\* PBXTargetDependency \*/,\n", r"\1", t, count=1),
     "does not depend on ShareExtension"),
    ("another App Group in one entitlements file", "ShareExtension/ShareExtension.entitlements",
     lambda t: t.replace("group.com.", "group.org."), "one and the same App Group"),
    ("another App Group in the Swift constant", "Shared/SharedContainer.swift",
     lambda t: t.replace('appGroup = "group.com.', 'appGroup = "group.org.'), "is not SharedContainer.appGroup"),
    ("iOS 16.0 for one target", "pbxproj",
     lambda t: t.replace("IPHONEOS_DEPLOYMENT_TARGET = 17.0;", "IPHONEOS_DEPLOYMENT_TARGET = 16.0;", 1),
     "IPHONEOS_DEPLOYMENT_TARGET is 16.0"),
    ("Swift 5 for one target", "pbxproj", lambda t: t.replace("SWIFT_VERSION = 6.0;", "SWIFT_VERSION = 5.0;", 1),
     "SWIFT_VERSION is 5.0"),
    ("the package from elsewhere", "pbxproj", lambda t: t.replace("relativePath = ../..;", "relativePath = ../;"),
     "local package at ../.."),
    ("the app not linking CourierKit", "pbxproj",
     lambda t: re.sub(r"\t\t\t\t\w{24} /\* CourierKit in Frameworks \*/,\n", "", t, count=1),
     "does not link CourierKit"),
    ("the tests linking CourierKit too", "pbxproj",
     lambda t: re.sub(r"(name = CourierSampleTests;\n\t\t\tpackageProductDependencies = \(\n)",
                      lambda m: m.group(1) + "\t\t\t\t%s /* CourierKit */,\n"
                      % re.search(r"(\w{24}) /\* CourierKit \*/ = \{", t).group(1), t),
     "a second static copy"),
    ("the extension's bundle id outside the app's", "pbxproj",
     lambda t: t.replace('"$(SAMPLE_BUNDLE_ID).share"', '"com.example.share"'), "does not extend"),
    ("an Info.plist key missing", "CourierSample/Info.plist",
     lambda t: re.sub(LOCAL_NETWORK + r"\t<string>.*?</string>\n", "", t), "has no NSLocalNetworkUsageDescription"),
    ("an entitlements file missing", "CourierSample/CourierSample.entitlements", None, "is not a file"),
    ("Info.plist copied as a resource", "pbxproj", lambda t: t.replace("\t\t\t\tInfo.plist,\n", "", 1),
     "copies Info.plist into the bundle"),
    ("a brace missing", "pbxproj", lambda t: t[:t.rindex("}")], "unexpected end"),
    ("no shared scheme", "CourierSample.xcodeproj/xcshareddata/xcschemes/CourierSample.xcscheme", None,
     "no shared scheme"),
]


def self_test(path):
    """Each broken copy of the project must fail, with words that name what broke; the intact
    copy must pass. A check that cannot fail proves nothing."""
    path = os.path.normpath(path)
    folder, name = os.path.dirname(path), os.path.basename(path)
    manifest = os.path.abspath(os.path.join(folder, "..", "..", "Package.swift"))
    missed = 0
    for title, relative, edit, words in [("nothing (the intact copy)", None, None, None)] + MUTATIONS:
        with tempfile.TemporaryDirectory(prefix="xcodeproj-check.") as work:
            copy = os.path.join(work, "Samples", os.path.basename(folder))
            shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("xcuserdata", "project.xcworkspace"))
            os.symlink(manifest, os.path.join(work, "Package.swift"))  # ../.. of the copy
            if relative:
                target = os.path.join(copy, name, "project.pbxproj") if relative == "pbxproj" \
                    else os.path.join(copy, relative)
                if edit is None:
                    os.remove(target)
                else:
                    text = open(target, encoding="utf-8").read()
                    if edit(text) == text:
                        sys.exit("xcodeproj-check --self-test: the edit %r changes nothing: update it" % title)
                    open(target, "w", encoding="utf-8").write(edit(text))
            problems = check(os.path.join(copy, name))
            if words is None:
                caught = not problems
                print("%s  %s" % ("clean " if caught else "BROKEN", title) + "".join("\n    " + p for p in problems))
            else:
                caught = any(words in p for p in problems)
                first = problems[0] if problems else "no problem found"
                print("%s  %s: %s" % ("caught" if caught else "MISSED", title, first))
            missed += not caught
    print("xcodeproj-check --self-test: %d of %d broken copies failed as they should, and the intact one passed%s"
          % (len(MUTATIONS) - missed, len(MUTATIONS), "" if not missed else " — NOT SO: the check is unsound"))
    return 1 if missed else 0


def main(arguments):
    testing = arguments[:1] == ["--self-test"]
    paths = arguments[1:] if testing else arguments
    if len(paths) != 1 or not paths[0].rstrip("/").endswith(".xcodeproj"):
        print(__doc__.split("\n\n")[1])
        return 2
    if testing:
        return self_test(paths[0].rstrip("/"))
    problems = check(paths[0].rstrip("/"))
    for problem in problems:
        print("xcodeproj-check: " + problem)
    print("xcodeproj-check: %s — %s" % (paths[0], "%d problem(s)" % len(problems) if problems else
                                         "3 targets, the extension embedded, CourierKit from ../.., one App Group, "
                                         "the Info.plist keys, iOS 17.0, Swift 6, the shared scheme"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

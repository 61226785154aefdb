#!/usr/bin/env python3
"""`make ios-check-mutations`: proves that `make ios-check` reports an error in Apple-only code.

    Tools/ios-check/ios-check-mutations.py [APP_DIR...]

For each file that holds Apple-only code, among the files `make ios-check` type-checks, it
plants an error in every branch that iOS compiles and Linux does not (`#if os(iOS)`,
`#elseif canImport(Darwin)`, the `#else` of `#if canImport(FoundationNetworking)`, …) or, in a
file that imports an Apple-only module outside any `#if` and in every file of an app directory
(the device kit's app and share extension, the iOS doc examples), at its end; runs the check on
a copy of the package; and requires each planted error to be reported by file and line. A file
two targets compile (the kit's `Shared/`) is planted once. Then each package file with Apple-only
code gets a data race in its Apple-only branch, in a run of its own (SIL's passes run only on a
module that type-checks), which must be reported as SIL reports it ("sending 'b' risks causing
data races"). The files are found by their branches, never from a list, so new Apple-only code
is covered as it lands. One line per file; exit 1 if any planted error went unreported, 2 if the
unmutated package is not clean to begin with (or no SDK: ios-check says which).

Each mutation run takes the modules it cannot reach (those that do not import the mutated one)
from a clean baseline run; everything from the mutated module on is checked as `make ios-check`
checks it. Needs the iOS SDK, so it is not part of `make test`.
"""
import importlib.util, json, os, re, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ios_check", os.path.join(HERE, "ios-check.py"))
ios_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ios_check)

# What `canImport` answers on each platform, for the modules Courier's conditions name. A
# condition naming a module not listed here stops the run: its answer must be decided, not guessed.
APPLE_ONLY = {"Darwin", "UIKit", "SwiftUI", "BackgroundTasks", "Network", "Compression", "AppKit", "os", "Combine"}
# Observation ships with the Swift toolchain on Linux too.
LINUX_ONLY = {"Glibc", "Musl", "FoundationNetworking", "AsyncHTTPClient", "NIOPosix", "CLZ4"}
EVERYWHERE = {"Foundation", "Dispatch", "Logging", "Observation"}
PLATFORMS = {"iOS": ("iOS", APPLE_ONLY), "Linux": ("Linux", LINUX_ONLY)}
DIRECTIVE = re.compile(r"^\s*#(if|elseif|else|endif)\b\s*(.*?)\s*(//.*)?$")
IMPORT_LINE = re.compile(r"^\s*import\s+(\w+)")
MARK = "courierPlantedError"


def evaluate(condition, platform):
    """The truth of an `#if` condition on `platform` ("iOS" or "Linux"), Debug configuration."""
    os_name, modules = PLATFORMS[platform]

    def can_import(match):
        module = match.group(1)
        if module not in APPLE_ONLY | LINUX_ONLY | EVERYWHERE:
            sys.exit("ios-check-mutations: no answer for canImport(%s): add it to a set in %s" % (module, __file__))
        return str(module in modules or module in EVERYWHERE)

    expression = re.sub(r"canImport\((\w+)\)", can_import, condition)
    expression = re.sub(r"os\((\w+)\)", lambda m: str(m.group(1) == os_name), expression)
    expression = re.sub(r"\bDEBUG\b", "True", expression)
    # Conditions set only by a repository make target (`make lock-hold`), never by an app build.
    expression = re.sub(r"\bCOURIER_LOCK_PROBE\b", "False", expression)
    expression = expression.replace("&&", " and ").replace("||", " or ").replace("!", " not ")
    if not re.fullmatch(r"[\sA-Za-z()]*", expression) or set(re.findall(r"[A-Za-z]+", expression)) - \
            {"True", "False", "and", "or", "not"}:
        sys.exit("ios-check-mutations: cannot read the condition %r" % condition)
    return eval(expression)


def apple_only_branches(lines):
    """(first, end) line indexes (0-based; `end` is the directive closing it) of each branch
    that iOS compiles and Linux does not."""
    found, stack = [], []  # per open #if: {"outer", "active", "taken", "open"}, each (iOS, Linux)
    for number, line in enumerate(lines):
        match = DIRECTIVE.match(line)
        if not match:
            continue
        keyword, condition = match.group(1), match.group(2)
        if keyword != "if" and stack[-1]["open"] is not None:
            found.append((stack[-1]["open"], number))  # the directive closes an Apple-only branch
            stack[-1]["open"] = None
        if keyword == "endif":
            stack.pop()
            continue
        if keyword == "if":
            outer = stack[-1]["active"] if stack else (True, True)
            stack.append({"outer": outer, "active": (False, False), "taken": (False, False), "open": None})
        frame = stack[-1]
        holds = [keyword == "else" or evaluate(condition, platform) for platform in ("iOS", "Linux")]
        frame["active"] = tuple(frame["outer"][i] and not frame["taken"][i] and holds[i] for i in range(2))
        frame["taken"] = tuple(frame["taken"][i] or frame["active"][i] for i in range(2))
        if frame["active"] == (True, False):
            frame["open"] = number + 1
    assert not stack, "unbalanced #if"
    return found


# A line that opens a declaration's or a statement's braces, not a closure's.
DECLARATION = re.compile(
    r"^\s*\}?\s*(@\w+(\([^)]*\))?\s+)*((public|private|fileprivate|internal|package|static|class|final|override|"
    r"mutating|nonisolated|convenience|required|open|lazy|weak|unowned|indirect)\s+)*"
    r"(func|init|deinit|var|let|subscript|struct|class|enum|extension|protocol|actor|if|else|for|while|guard|"
    r"switch|do|catch|repeat|defer|get|set|willSet|didSet|case|default)\b")


def in_closure(lines, first):
    """Whether the code at line `first` is in a closure's body: there the compiler solves the body
    with the closure, and its first error hides the rest, so a branch gets one planted error."""
    depth = 0
    for line in reversed(lines[:first]):
        code = re.sub(r'"(\\.|[^"\\])*"', '""', line.split("//")[0])
        for character in reversed(code):
            depth += {"}": 1, "{": -1}.get(character, 0)
            if depth < 0:
                opening = code[:code.rfind("{") + 1]
                if re.search(r"\bin\s*$", code) or re.search(r"=\s*\{", opening):
                    return True
                return not DECLARATION.match(code)
    return False


def plants(path, in_app):
    """Where to plant errors in one file: (0-based line, text) pairs, or none. Every file of an
    app is Apple-only, whatever it imports."""
    with open(path, encoding="utf-8") as source:
        lines = source.read().split("\n")
    depth, unconditional = 0, in_app
    for line in lines:
        match = DIRECTIVE.match(line)
        if match:
            depth += {"if": 1, "endif": -1}.get(match.group(1), 0)
        elif depth == 0 and IMPORT_LINE.match(line) and IMPORT_LINE.match(line).group(1) in APPLE_ONLY:
            unconditional = True
    code = lambda l: l.strip() and not DIRECTIVE.match(l)
    found = []
    for first, end in apple_only_branches(lines):
        start_line = next((l for l in lines[first:end] if code(l)), "")
        indent = re.match(r"\s*", start_line).group(0)
        if start_line.strip().startswith("."):
            # A branch inside a chain of modifiers (`#if os(iOS) .keyboardType(.URL) #endif`)
            # takes a member, once: the compiler checks no further in an expression that failed.
            found.append((first, "%s.%s%d()" % (indent, MARK, first)))
            continue
        if in_closure(lines, first):
            found.append((first, '%slet %s%d: Int = "planted"' % (indent, MARK, first)))
            continue
        # At the branch's start and at its end, so that nothing in it can hide the rest.
        end_indent = re.match(r"\s*", next((l for l in reversed(lines[first:end]) if code(l)), "")).group(0)
        found += [(first, '%slet %s%d: Int = "planted"' % (indent, MARK, first)),
                  (end, '%slet %s%d: Int = "planted"' % (end_indent, MARK, end))]
    if unconditional:
        found.append((len(lines), 'let %s%d: Int = "planted"' % (MARK, len(lines))))
    return sorted(set(found))


def race_plant(path):
    """A data race planted in the file's first top-level Apple-only branch, as (0-based line,
    text), or None: a non-Sendable value used after a `Task` closure that captured it was sent
    off. It type-checks; only SIL's region-isolation pass reports it ("sending 'b' risks causing
    data races"), so its report proves that pass ran on the Apple-only code."""
    with open(path, encoding="utf-8") as source:
        lines = source.read().split("\n")
    for first, end in apple_only_branches(lines):
        depth = 0
        for line in lines[:first]:
            match = DIRECTIVE.match(line)
            if match:
                depth += {"if": 1, "endif": -1}.get(match.group(1), 0)
        # A branch of code, not a branch of imports (`#if canImport(os) import os #endif`).
        if depth == 1 and not lines[first - 1].startswith(" ") and end - first > 10:
            return (end, "func %sRace%d() async { final class Box { var x = 0 }; let b = Box(); "
                         "Task { @MainActor in _ = b.x }; b.x += 1 }" % (MARK, end))
    return None


def mutate(root, path, planted):
    """Writes `path` under `root` with the planted lines; returns their 1-based line numbers."""
    with open(path, encoding="utf-8") as source:
        lines = source.read().split("\n")
    numbers = []
    for offset, (number, text) in enumerate(planted):
        lines.insert(number + offset, text)
        numbers.append(number + offset + 1)
    os.remove(os.path.join(root, path))
    with open(os.path.join(root, path), "w", encoding="utf-8") as mutated:
        mutated.write("\n".join(lines))
    return numbers


def run_check(root, apps, environment):
    result = subprocess.run([sys.executable, os.path.join(HERE, "ios-check.py")] + apps, cwd=root,
                            capture_output=True, text=True, env=dict(os.environ, **environment))
    return result.returncode, result.stdout + result.stderr


def copy_package(root):
    """What the check reads, as links to the package's files (`mutate` replaces one link with
    a file), and `.build` (checkouts, module cache) shared."""
    for name in ("Sources", "Samples", "Tools"):
        shutil.copytree(name, os.path.join(root, name), copy_function=lambda source, target:
                        os.symlink(os.path.abspath(source), target))
    os.symlink(os.path.abspath(".build"), os.path.join(root, ".build"))


def main(apps):
    work = tempfile.mkdtemp(prefix="ios-check-mutations.")
    try:
        description = os.path.join(work, "description.json")
        with open(description, "w") as described:
            json.dump(ios_check.package_description(), described)
        os.environ["IOS_CHECK_DESCRIPTION"] = description
        interfaces = os.path.join(work, "interfaces")
        os.makedirs(interfaces)
        environment = {"IOS_CHECK_DESCRIPTION": description}
        status, output = run_check(".", apps, dict(environment, IOS_CHECK_SAVE=interfaces))
        if status != 0:
            print(output.rstrip())
            print("ios-check-mutations: the package must pass `make ios-check` before a mutation proves anything")
            return 2
        order = [(name, files) for name, kind, files, *_ in ios_check.modules(apps) if kind in ("swift", "xctest")]
        missed, checked, seen = 0, 0, set()
        # Each file once with type errors, then, for a package file with a top-level Apple-only
        # branch, once with a data race (SIL's passes run only on a module that type-checks).
        runs = [(index, module, path, "type") for index, (module, files) in enumerate(order) for path in files]
        runs += [(index, module, path, "race") for index, module, path, _ in runs
                 if not any(path.startswith(app.rstrip("/") + "/") for app in apps) and race_plant(path)]
        for index, module, path, kind in runs:
            if kind == "type":
                planted = plants(path, in_app=any(path.startswith(app.rstrip("/") + "/") for app in apps))
                if not planted or path in seen:
                    continue
                seen.add(path)
            else:
                planted = [race_plant(path)]
            root = os.path.join(work, "tree-%d" % checked)
            copy_package(root)
            lines = mutate(root, path, planted)
            # Modules before this one that do not import it cannot see the mutation.
            reachable = {module}
            for later, later_files in order[index + 1:]:
                if ios_check.imported_modules(later_files) & reachable:
                    reachable.add(later)
            trusted = [name for name, _ in order if name not in reachable]
            status, output = run_check(root, apps, dict(environment, IOS_CHECK_TRUSTED=",".join(trusted),
                                                        IOS_CHECK_INTERFACES=interfaces))
            # A race counts only as SIL reports it: a type error there would prove nothing.
            said = "" if kind == "type" else r".*risks causing data races"
            reported = [line for line in lines
                        if re.search(r"^\s*%s:%d:\d+: error: %s" % (re.escape(path), line, said), output, re.M)]
            unreported = sorted(set(lines) - set(reported))
            checked += 1
            if status != 0 and not unreported:
                what = "planted error(s)" if kind == "type" else "planted data race(s)"
                print("caught  %s: %d %s, each reported by file and line (lines %s)"
                      % (path, len(lines), what, ", ".join(map(str, lines))))
            else:
                missed += 1
                print("MISSED  %s: line(s) %s not reported (check exit %d)"
                      % (path, ", ".join(map(str, unreported)) or "none", status))
                print("\n".join("    " + l for l in output.rstrip().splitlines()[-12:]))
            shutil.rmtree(root)
        print("ios-check-mutations: %d of %d mutations of files with Apple-only code (type errors, and data "
              "races SIL's passes find) had every planted error reported%s"
              % (checked - missed, checked, "" if not missed else " — the check can hide errors"))
        return 1 if missed or not checked else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Reads an Xcode project (`project.pbxproj`, an OpenStep property list) and finds what its
targets build: their settings, synchronized folders and Swift sources. Used by `check.py`
(`make xcodeproj-check`) and `Tools/ios-check/ios-check.py` (which modules to type-check).
Python 3 standard library; nothing here needs Xcode.
"""
import glob, os, re

OBJECT_ID = re.compile(r"^[0-9A-F]{24}$")
# Whitespace, comments, quoted strings, bare strings (paths hold slashes, never "//" or "/*"), punctuation.
TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\]|\\.)*"|(?:[^\s{}()=;,"/]|/(?![/*]))+|[{}()=;,]', re.S)


class ProjectError(Exception):
    pass


def parse(text):
    """An OpenStep property list (dictionaries, arrays, strings) as Python dicts, lists, strs."""
    tokens = [(m.group(0), m.start()) for m in TOKEN.finditer(text)
              if not m.group(0).isspace() and not m.group(0).startswith(("//", "/*"))]
    if sum(len(m.group(0)) for m in TOKEN.finditer(text)) != len(text):
        raise ProjectError("unreadable characters in the property list")
    position = 0

    def fail(message):
        offset = tokens[position][1] if position < len(tokens) else len(text)
        raise ProjectError("%s at line %d" % (message, text.count("\n", 0, offset) + 1))

    def peek():
        if position >= len(tokens):
            fail("unexpected end")
        return tokens[position][0]

    def take(expected=None):
        nonlocal position
        token = peek()
        if expected and token != expected:
            fail("expected %r, found %r" % (expected, token))
        position += 1
        return token

    def value():
        token = take()
        if token == "{":
            result = {}
            while peek() != "}":
                key = string(take())
                take("=")
                result[key] = value()
                take(";")
            take("}")
            return result
        if token == "(":
            result = []
            while peek() != ")":
                result.append(value())
                if peek() != ")":
                    take(",")
            take(")")
            return result
        if token in "{}()=;,":
            fail("unexpected %r" % token)
        return string(token)

    def string(token):
        if not token.startswith('"'):
            return token
        escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
        return re.sub(r"\\(U[0-9a-fA-F]{4}|.)", lambda m: chr(int(m.group(1)[1:], 16))
                      if len(m.group(1)) == 5 else escapes.get(m.group(1), m.group(1)), token[1:-1])

    result = value()
    if position != len(tokens):
        fail("text after the end")
    return result


class Project:
    """A parsed project.pbxproj, and where its paths lead on disk."""

    def __init__(self, path):
        self.path = os.path.normpath(path)
        self.root = os.path.dirname(os.path.abspath(self.path))  # SRCROOT: settings' paths are relative to it
        with open(os.path.join(self.path, "project.pbxproj"), encoding="utf-8") as source:
            self.plist = parse(source.read())
        self.objects = self.plist.get("objects", {})
        self.project = self.objects.get(self.plist.get("rootObject"), {})

    def targets(self):
        return {self.objects[t]["name"]: self.objects[t] for t in self.project.get("targets", []) if t in self.objects}

    def target_id(self, name):
        return next((t for t in self.project.get("targets", []) if self.objects.get(t, {}).get("name") == name), None)

    def settings(self, target, configuration):
        """A target's build settings in a configuration, over the project's, with $(VAR) resolved."""
        def named(owner):
            listed = self.objects.get(owner.get("buildConfigurationList"), {}).get("buildConfigurations", [])
            found = [self.objects[c] for c in listed if self.objects.get(c, {}).get("name") == configuration]
            return found[0].get("buildSettings", {}) if found else {}
        merged = dict(named(self.project), **named(target), TARGET_NAME=target.get("name", ""))
        resolve = lambda v: re.sub(r"\$\((\w+)\)", lambda m: merged.get(m.group(1), "$(%s)" % m.group(1)), v)
        return {k: resolve(v) if isinstance(v, str) else v for k, v in merged.items()}

    def folders(self, target):
        """(folder on disk, files excluded from this target) for each synchronized group."""
        result = []
        for group_id in target.get("fileSystemSynchronizedGroups", []):
            group = self.objects.get(group_id, {})
            excluded = set()
            for exception in group.get("exceptions", []):
                if self.objects.get(exception, {}).get("target") == self.target_id(target.get("name")):
                    excluded.update(self.objects[exception].get("membershipExceptions", []))
            result.append((os.path.join(self.root, group.get("path", "")), excluded))
        return result

    def swift_files(self, target):
        """The target's Swift sources, as Xcode 16 finds them in its synchronized folders."""
        files = []
        for folder, excluded in self.folders(target):
            for path in sorted(glob.glob(os.path.join(folder, "**", "*.swift"), recursive=True)):
                if os.path.relpath(path, folder) not in excluded:
                    files.append(path)
        return files

    def source_constant(self, target, name):
        """The string a Swift `static let <name> = "…"` in the target's sources holds."""
        for path in self.swift_files(target):
            match = re.search(r'static let %s = "([^"]*)"' % name, open(path, encoding="utf-8").read())
            if match:
                return match.group(1)
        return None

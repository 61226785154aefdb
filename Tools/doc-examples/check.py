#!/usr/bin/env python3
"""Code in the documents compiles: every ```swift block of README.md, Samples/README.md and the
DocC articles is either a region of code the build compiles, or says why it is not.

    Tools/doc-examples/check.py           # `make test`: exit 1 on any block out of step
    Tools/doc-examples/check.py --write   # `make doc-snippets`: copy the regions into the documents

A block preceded by `<!-- snippet: NAME -->` must be, byte for byte once dedented, the region
between `// snippet: NAME` and `// snippet end` in Tests/CourierTests/DocumentationExamples.swift
(compiled and partly run on Linux by `make test`) or in Tools/doc-examples/ios (type-checked for
iOS by `make ios-check`). A block preceded by `<!-- not compiled: REASON -->` is a manifest or
shell excerpt. Any other ```swift block fails the check.
"""
import glob, os, re, sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SOURCES = ["Tests/CourierTests/DocumentationExamples.swift"] + sorted(
    glob.glob(os.path.join(ROOT, "Tools/doc-examples/ios/Sources/**/*.swift"), recursive=True))
DOCUMENTS = ["README.md", "Samples/README.md"] + sorted(glob.glob(os.path.join(ROOT, "Sources/*/*.docc/*.md")))
REGION = re.compile(r"^[ \t]*// snippet: ([\w-]+)\n(.*?)^[ \t]*// snippet end\n", re.M | re.S)
# A block may sit in a list item: its marker, fences and lines then share an indent.
BLOCK = re.compile(r"^([ \t]*)(<!-- (snippet|not compiled): ([^>]*?) -->\n\1)?```swift\n(.*?)^\1```", re.M | re.S)


def dedent(text):
    lines = text.split("\n")
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "\n".join(l[indent:] for l in lines)


def regions():
    found = {}
    for path in SOURCES:
        with open(os.path.join(ROOT, path), encoding="utf-8") as source:
            for match in REGION.finditer(source.read()):
                assert match.group(1) not in found, "snippet %s defined twice" % match.group(1)
                found[match.group(1)] = (dedent(match.group(2)), os.path.relpath(os.path.join(ROOT, path), ROOT))
    return found


def main(write):
    snippets, problems, compiled, excerpts, used = regions(), [], 0, 0, set()
    for document in DOCUMENTS:
        path = os.path.join(ROOT, document)
        with open(path, encoding="utf-8") as text:
            original = text.read()

        def replace(match):
            nonlocal compiled, excerpts
            where = "%s:%d" % (os.path.relpath(path, ROOT), original.count("\n", 0, match.start()) + 1)
            indent, kind, name = match.group(1), match.group(3), match.group(4)
            body = "".join(l[len(indent):] if l.startswith(indent) else l for l in match.group(5).splitlines(True))
            if kind is None:
                problems.append("%s: a swift block with neither <!-- snippet: NAME --> nor <!-- not compiled: WHY -->" % where)
                return match.group(0)
            if kind == "not compiled":
                excerpts += 1
                return match.group(0)
            if name not in snippets:
                problems.append("%s: no region `// snippet: %s` in the compiled examples" % (where, name))
                return match.group(0)
            used.add(name)
            compiled += 1
            region, source = snippets[name]
            if body != region:
                if not write:
                    problems.append("%s: the block differs from `%s` in %s (make doc-snippets copies it)" % (where, name, source))
                lines = "".join(indent + l if l.strip() else l for l in region.splitlines(True))
                return indent + match.group(2) + "```swift\n" + lines + indent + "```"
            return match.group(0)

        updated = BLOCK.sub(replace, original)
        if write and updated != original:
            with open(path, "w", encoding="utf-8") as text:
                text.write(updated)
            print("doc-examples: updated %s" % os.path.relpath(path, ROOT))
    unused = sorted(set(snippets) - used)
    problems += ["a region no document shows: %s (%s)" % (name, snippets[name][1]) for name in unused]
    for problem in problems:
        print("doc-examples: " + problem)
    print("doc-examples: %d swift blocks are compiled code (%d regions), %d are manifest excerpts%s"
          % (compiled, len(snippets), excerpts, "" if not problems else "; %d problems" % len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main("--write" in sys.argv[1:]))

#!/usr/bin/env bash
# The files on the data path, measured: builds courier-bench with coverage, delivers 1 message
# and then 401 to the loopback server, and lists the source files with a function that ran at
# least once per extra message (debug-only invariant checks left out). ARCHITECTURE.md's
# "From send to delivered" lists these files in the order a message visits them.
#
# Usage: Tools/data-path/data-path.sh [scratch-dir]   (make data-path; needs python3)
set -euo pipefail
scratch=${1:-.build-coverage}
swift=${SWIFT:-swift}
bin=$(dirname "$(command -v "$swift")")
"$swift" build --scratch-path "$scratch" --traits AsyncHTTPClientTransport --product courier-bench \
    -Xswiftc -profile-generate -Xswiftc -profile-coverage-mapping >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in 1 401; do
    LLVM_PROFILE_FILE="$out/$n.profraw" "$scratch/debug/courier-bench" --deliver "$n" 0 courier >/dev/null
    "$bin/llvm-profdata" merge -o "$out/$n.profdata" "$out/$n.profraw"
    "$bin/llvm-cov" export -format=text -instr-profile="$out/$n.profdata" "$scratch/debug/courier-bench" >"$out/$n.json"
done
python3 - "$out" "$(pwd)/" <<'PY'
import collections, json, sys
out, root = sys.argv[1], sys.argv[2]
def counts(n):
    data = json.load(open(f"{out}/{n}.json"))["data"][0]["functions"]
    return {f["name"]: (f["count"], f["filenames"][0]) for f in data}
one, many = counts(1), counts(401)
files = collections.Counter()
for name, (count, path) in many.items():
    if not path.startswith(root + "Sources/") or "brokenInvariant" in name:
        continue
    if count - one.get(name, (0, path))[0] >= 400:
        files[path[len(root):]] += 1
for module in ("Sources/CourierKit/", "Sources/CourierLog/"):
    listed = sorted(p for p in files if p.startswith(module))
    print(f"{module}: {len(listed)} files")
    for p in listed:
        print(f"  {p[len(module):]} ({files[p]} functions)")
PY

#!/usr/bin/env bash
# Courier's delivery speed next to the bare AsyncHTTPClient, measured the way issue 25 asks:
# `courier-bench --deliver N RATE courier|ahc` run side by side, alternated, ROUNDS times at each
# failure rate, each run in a fresh process. Prints every round, then per side the median
# seconds (and, with perf, CPU ms and context switches per message), and the per-round ratio
# (bare seconds / Courier seconds: 1.0 is as fast as the bare client) as median, mean and range.
#
# One run is too noisy to judge on a shared machine (the same binary varies by ±15 % between
# rounds): compare medians of many rounds, measured in one sitting.
#
# Usage: Tools/delivery-ratio/delivery-ratio.sh [rounds] [messages] [rates...]
#        (make delivery-ratio; ROUNDS=20 N=4000 RATES="0 0.5" by default; BIN to reuse a build)
set -euo pipefail
rounds=${1:-20}; count=${2:-4000}; shift $(( $# >= 2 ? 2 : $# )) || true
rates=${*:-0 0.5}
swift=${SWIFT:-swift}
if [ -z "${BIN:-}" ]; then
    "$swift" build -c release --traits AsyncHTTPClientTransport --product courier-bench >/dev/null
    BIN=$("$swift" build -c release --traits AsyncHTTPClientTransport --show-bin-path)/courier-bench
fi
perf_ok=0
if command -v perf >/dev/null && perf stat -e task-clock -x, -o /dev/null true 2>/dev/null; then perf_ok=1; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # side rate -> "seconds cpu_ms switches"
    if [ $perf_ok = 1 ]; then
        s=$(perf stat -e task-clock,context-switches -x, -o "$out/perf" "$BIN" --deliver "$count" "$2" "$1" | tail -1)
        echo "$s $(grep task-clock "$out/perf" | cut -d, -f1) $(grep context-switches "$out/perf" | cut -d, -f1)"
    else
        echo "$("$BIN" --deliver "$count" "$2" "$1" | tail -1) 0 0"
    fi
}
for rate in $rates; do
    : >"$out/rows"
    for k in $(seq 1 "$rounds"); do
        c=$(run courier "$rate"); a=$(run ahc "$rate")
        echo "$k $c $a" >>"$out/rows"
        echo "rate $rate round $k: courier $c  ahc $a"
    done
    python3 - "$out/rows" "$rate" "$count" "$perf_ok" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split()[1:])) for l in open(sys.argv[1])]
rate, n, perf = sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
for name, i in (("courier", 0), ("bare ahc", 3)):
    line = f"  {name:9} median {st.median(r[i] for r in rows):.3f} s"
    if perf:
        line += f", {st.median(r[i + 1] for r in rows):.0f} ms CPU, {st.median(r[i + 2] for r in rows) / n:.1f} cs/msg"
    print(line)
ratio = [r[3] / r[0] for r in rows]
print(f"rate {rate}: ratio (bare / Courier) median {st.median(ratio):.2f}, mean {st.mean(ratio):.2f}, "
      f"range {min(ratio):.2f}-{max(ratio):.2f} over {len(rows)} alternated rounds")
PY
done

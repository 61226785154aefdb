#!/usr/bin/env python3
"""Turns package-benchmark's JMH export into Benchmarks/results.md and Benchmarks/send-cost.svg.

    python3 Benchmarks/chart.py RESULTS_DIR "machine description"

The chart: p50 wall-clock cost of accepting one message (log scale) against the messages
already pending, one line per way of doing it, the bare write(2) as the floor.
"""
import glob, json, math, os, sys

here = os.path.dirname(os.path.abspath(__file__))
results_dir, machine = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
rows = {}
for path in glob.glob(os.path.join(results_dir, "*.json")):
    for element in json.load(open(path)):
        # "…Send.Courier_send/100" → "Courier send/100" (no dots in our names)
        name = element["benchmark"].split(".")[-1].replace("_", " ")
        metrics = {"throughput": element["primaryMetric"]}
        metrics.update(element.get("secondaryMetrics", {}))
        wall = next((m for k, m in metrics.items() if "wall" in k.lower()), None)
        mallocs = next((m for k, m in metrics.items() if "malloc" in k.lower()), None)
        if wall is None:
            continue
        rows[name] = {
            "p50": wall["scorePercentiles"]["50.0"], "p99": wall["scorePercentiles"]["99.0"],
            "throughput": metrics["throughput"]["scorePercentiles"]["50.0"],
            "mallocs": mallocs["scorePercentiles"]["50.0"] if mallocs else None,
        }
if not rows:
    sys.exit("chart.py: no results with a wall-clock metric in " + results_dir)

with open(os.path.join(here, "results.md"), "w") as out:
    out.write(f"Measured by `make bench` on {machine}. Wall clock per accepted message "
              "(per compaction for the compaction rows).\n\n")
    out.write("| benchmark | p50 µs | p99 µs | per second (p50) | allocations (p50) |\n|---|---:|---:|---:|---:|\n")
    for name in sorted(rows):
        r = rows[name]
        m = "" if r["mallocs"] is None else f"{r['mallocs']:.0f}"
        out.write(f"| {name} | {r['p50']:.2f} | {r['p99']:.2f} | {r['throughput']:,.0f} | {m} |\n")

series = {}
for name, r in rows.items():
    if "/" in name and "compaction" not in name:  # compaction time is a table row, not a send cost
        label, pending = name.rsplit("/", 1)
        series.setdefault(label, []).append((int(pending), r["p50"]))
floor = next((r["p50"] for n, r in rows.items() if n.startswith("write(2)")), None)
values = [v for s in series.values() for _, v in s] + ([floor] if floor else [])
lo, hi = math.log10(min(values) / 2), math.log10(max(values) * 2)
W, H, L, R, T, B = 720, 420, 70, 210, 40, 50
xs = sorted({p for s in series.values() for p, _ in s})
def x(p): return L + (W - L - R) * (xs.index(p) / max(1, len(xs) - 1))
def y(v): return T + (H - T - B) * (1 - (math.log10(v) - lo) / (hi - lo))
colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{L}" y="22" font-size="14">Cost of accepting one ~150-byte message (p50, log scale)</text>']
for e in range(math.floor(lo), math.ceil(hi) + 1):
    v = 10 ** e
    if lo <= e <= hi:
        svg.append(f'<line x1="{L}" x2="{W - R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{L - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g} µs</text>')
for p in xs:
    svg.append(f'<text x="{x(p):.1f}" y="{H - B + 20}" text-anchor="middle">{p:,} pending</text>')
for i, (label, points) in enumerate(sorted(series.items())):
    points.sort()
    c = colors[i % len(colors)]
    svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="' + " ".join(f"{x(p):.1f},{y(v):.1f}" for p, v in points) + '"/>')
    for p, v in points:
        svg.append(f'<circle cx="{x(p):.1f}" cy="{y(v):.1f}" r="3" fill="{c}"/>')
    svg.append(f'<text x="{W - R + 10}" y="{y(points[-1][1]) + 4:.1f}" fill="{c}">{label}</text>')
if floor:
    svg.append(f'<line x1="{L}" x2="{W - R}" y1="{y(floor):.1f}" y2="{y(floor):.1f}" stroke="#555" stroke-dasharray="4 4"/>')
    svg.append(f'<text x="{W - R + 10}" y="{y(floor) + 4:.1f}" fill="#555">write(2), the floor</text>')
svg.append(f'<text x="{L}" y="{H - 8}" fill="#555">{machine}</text></svg>')
open(os.path.join(here, "send-cost.svg"), "w").write("\n".join(svg) + "\n")
print("wrote Benchmarks/results.md and Benchmarks/send-cost.svg")

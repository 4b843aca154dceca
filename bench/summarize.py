#!/usr/bin/env python3
"""Summarizes one device run: samebits' GPU benchmark (gpu_bench.json) next to PyTorch's figures
measured in the same call (torch_baseline.json): per-op ratios, geometric means over the anchor
shapes, and the share of the copy ceiling. Prints Markdown.

usage: bench/summarize.py RUN_DIR
"""
import json, math, os, re, sys

run = sys.argv[1] if len(sys.argv) > 1 else "."
ours = json.load(open(os.path.join(run, "gpu_bench.json")))
torch = None
if os.path.exists(os.path.join(run, "torch_baseline.json")):
    torch = json.load(open(os.path.join(run, "torch_baseline.json")))
elif os.path.exists(os.path.join(run, "torch.txt")):
    # The reference script's printed lines carry the same figures.
    import ast
    torch = {"price": {}, "inference_ms": {}, "graphsage_1000": {}}
    for line in open(os.path.join(run, "torch.txt")):
        line = line.strip()
        m = re.match(r"(E=\d+ N=\d+ F=\d+) (\{.*\})$", line)
        if m:
            torch["price"][m.group(1)] = ast.literal_eval(m.group(2))
        m = re.match(r"((?:cora|synthetic) .*det=(?:True|False)) ([\d.]+)$", line)
        if m:
            torch["inference_ms"][m.group(1)] = float(m.group(2))
        m = re.match(r"(\w+Sage det=(?:True|False)) (\{.*\})$", line)
        if m:
            torch["graphsage_1000"][m.group(1)] = ast.literal_eval(m.group(2))

def num(s):
    m = re.match(r"([\d.]+)([kM]?)", s)
    return int(float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6}[m.group(2)])

def shape_key(shape):
    """(E, N, F) of a shape label that names all three, in any order ("graph N=1M E=20M F=128")."""
    found = {k: re.search(rf"\b{k}=([\d.]+[kM]?)", shape) for k in "ENF"}
    if not all(found.values()):
        return None
    return (num(found["E"].group(1)), num(found["N"].group(1)), int(num(found["F"].group(1))))

def gmean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")

anchors = [(10_000_000, 1_000_000, 1), (2_000_000, 100_000, 64), (2_000_000, 1000, 64),
           (1_000_000, 2708, 128)]
rows = ours["rows"]
print(f"GPU: {ours['gpu']} ({ours['sms']} SMs); copy ceiling {ours['copy_ceiling_tbps']:.2f} TB/s\n")

print("| op | shape | atomic ms | sort every call (portable) | run_to_run every call | plan reused | same index again (automatic reuse) | torch default | torch deterministic | run_to_run / torch det |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratios = {"sort": [], "r2r": [], "plan": [], "again": [], "vs_torch_det": []}
for op, tkey in (("index_add", "index_add"), ("scatter_add", "scatter_add")):
    for a in anchors:
        sel = [r for r in rows if r["op"] == op and shape_key(r["shape"]) == a]
        get = lambda v: next((r["ms"] for r in sel if r["variant"].startswith(v)), None)
        at, so, pl = get("cuda.atomic"), get("cuda.sort_pull"), get("cuda.plan_pull")
        if at is None or so is None:
            continue
        # What a run_to_run call runs: the fixed-point sum where it takes the shape, else the sort.
        fx = get("cuda.fixed_point")
        rr = fx if fx is not None else so
        td = tdd = None
        if torch:
            t = torch["price"].get(f"E={a[0]} N={a[1]} F={a[2]}", {})
            td, tdd = t.get(f"{tkey} det=False"), t.get(f"{tkey} det=True")
        ratios["sort"].append(so / at)
        ratios["r2r"].append(rr / at)
        if pl: ratios["plan"].append(pl / at)
        ag = get("cuda.sort_pull (same index again)")
        if ag: ratios["again"].append(ag / at)
        if isinstance(tdd, (int, float)): ratios["vs_torch_det"].append(rr / tdd)
        f = lambda x: f"{x:.3f}" if isinstance(x, (int, float)) else "-"
        print(f"| {op} | E={a[0]} N={a[1]} F={a[2]} | {at:.3f} | {so:.3f} ({so/at:.2f}x) | "
              f"{rr:.3f} ({rr/at:.2f}x{', fixed point' if fx is not None else ', sort'}) | "
              f"{f(pl)}{f' ({pl/at:.2f}x)' if pl else ''} | {f(ag)}{f' ({ag/at:.2f}x)' if ag else ''} | {f(td)} | {f(tdd)} | "
              f"{f(rr / tdd) if isinstance(tdd, (int, float)) else '-'} |")
print()
print(f"Geometric means over the anchor shapes: sort every call / atomic = {gmean(ratios['sort']):.2f}x; "
      f"run_to_run every call / atomic = {gmean(ratios['r2r']):.2f}x; "
      f"plan reused / atomic = {gmean(ratios['plan']):.2f}x; "
      f"same index again (automatic reuse) / atomic = {gmean(ratios['again']):.2f}x; "
      f"run_to_run every call / PyTorch deterministic = {gmean(ratios['vs_torch_det']):.2f}x\n")

print("Share of the copy ceiling (bytes that must move: inputs once, outputs once), large shapes:\n")
print("| op | shape | variant | ms | % of copy ceiling |")
print("|---|---|---|---|---|")
for r in rows:
    k = shape_key(r["shape"])
    if r["family"] in ("scatter", "segment") and k and k[0] * max(k[2], 1) >= 64_000_000 and r["level"] != "not_guaranteed":
        print(f"| {r['op']} | {r['shape']} | {r['variant']} | {r['ms']:.3f} | {100 * r['tbps'] / ours['copy_ceiling_tbps']:.0f}% |")
print()

print("Portable variants against our atomic variant, geometric mean per op over every shape measured:\n")
print("| op | portable / atomic (geomean) | shapes |")
print("|---|---|---|")
by_op = {}
for r in rows:
    if r["level"] == "portable" and r["ratio_to_atomic"] > 0 and "[" not in r["variant"] and "alone" not in r["variant"] and "again" not in r["variant"]:
        by_op.setdefault(r["op"], []).append(r["ratio_to_atomic"])
for op, xs in by_op.items():
    print(f"| {op} | {gmean(xs):.2f}x | {len(xs)} |")
print(f"\nAll portable rows: geometric mean {gmean([x for xs in by_op.values() for x in xs]):.2f}x the atomic variant.\n")

if torch:
    print("PyTorch in the same call: " + json.dumps({k: torch[k] for k in ("env", "copy_TBps", "sum_TBps") if k in torch}))
    for k, v in torch.get("inference_ms", {}).items():
        print(f"- inference {k}: {v:.3f} ms")
    for k, v in torch.get("graphsage_1000", {}).items():
        print(f"- training {k}: {v}")

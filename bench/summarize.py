#!/usr/bin/env python3
"""Turns one device run's raw JSON into bench/BASELINE.md: the run's commit, date, GPU and command,
one table per op family (ms, ratio to our atomic variant, share of the copy ceiling), the scatter
family against PyTorch measured in the same call, GEMM against cuBLAS, and the GraphSAGE experiment
and inference. Reads from RUN_DIR: gpu_bench.json (samebits_bench_gpu --out), and where present
run.json (commit, date, command), torch_baseline.json or torch.txt (torch_reference.py),
experiment_cuda.json (samebits experiment --json), bench_graphsage.json (samebits bench graphsage
--json), bench_torch.json (python/bench/bench_torch.py), pyg_samebits.json (examples/pyg_cora.py
--json; runs before 147 split it with pyg_reference.json). Prints Markdown; the output depends on
the files alone, so the committed baseline can be checked against its input.

usage: bench/summarize.py RUN_DIR        print the baseline of the run in RUN_DIR
       bench/summarize.py --check FILE   regenerate FILE from the run it names; exit 1 if it differs
"""
import ast, difflib, json, math, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NG, RR, PO = "not_guaranteed", "run_to_run", "portable"
LEVELS = [NG, RR, PO]
ANCHORS = [(10_000_000, 1_000_000, 1), (2_000_000, 100_000, 64), (2_000_000, 1000, 64),
           (1_000_000, 2708, 128)]
FAMILIES = [("reduce", "Reductions: sum, dot, sum_dim"), ("scan", "Scans: cumsum"),
            ("histogram", "Histograms: bincount, histc"), ("gemm", "GEMM"),
            ("segment", "Segment reductions and graph aggregation"),
            ("indexing", "Indexing: index_select, gather"),
            ("scatter", "Scatter: index_add, scatter_add, scatter_reduce"),
            ("half", "Half precision: index_add of bfloat16 and float16"),
            ("overhead", "Host cost of one call on tiny inputs"),
            ("short", "Short scatters of a PyG training on Cora (time per call, calls queued back to back)")]
# Rows of the gemm family that are not one timing per variant: they get tables of their own.
GEMM_TUNING, GEMM_ACCURACY, GEMM_BF16 = "gemm_tuning", "gemm_accuracy", "gemm_bf16"
OWN_TABLES = {GEMM_TUNING, GEMM_ACCURACY, GEMM_BF16}
INTRO = ("The current figures of every CUDA op family on one GPU, regenerated from a run's raw "
         "JSON. \"x atomic\" is a variant's time over our own `not_guaranteed` (atomic) variant of "
         "the same op and shape in the same run; the percentage is the share of the copy ceiling: "
         "bytes that must move (inputs read once, outputs written once) per second over the "
         "device-to-device copy bandwidth measured at the start of the run. The designs tried and "
         "dropped, with the figures that decided them, are in docs/decisions.md.")


def load(run, name):
    path = os.path.join(run, name)
    return json.load(open(path)) if os.path.exists(path) else None


def load_torch(run):
    torch = load(run, "torch_baseline.json")
    if torch is not None or not os.path.exists(os.path.join(run, "torch.txt")):
        return torch
    # The reference script's printed lines carry the same figures.
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
    return torch


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


def ms(x):
    """Four significant digits, at least three decimals below 1 ms (0.400, 0.0395, 13.02, 5.830)."""
    if not isinstance(x, (int, float)):
        return "-"
    s = f"{x:.4g}"
    if "e" in s:
        return s
    whole, _, frac = s.partition(".")
    want = 3 if x < 1 else max(0, 4 - len(whole.lstrip("-")))
    return whole + ("." + frac.ljust(want, "0") if want else "")


def same_run(*items):
    """Ratios are taken within one run: a reconstructed run's rows name the run they come from."""
    return len({i.get("source_run") if isinstance(i, dict) else i for i in items}) == 1


class Run:
    def __init__(self, path):
        self.gpu = load(path, "gpu_bench.json")
        if self.gpu is None:
            sys.exit(f"summarize.py: no gpu_bench.json in {path}")
        self.meta = load(path, "run.json") or {}
        self.torch = load_torch(path)
        self.experiment = load(path, "experiment_cuda.json")
        self.inference = load(path, "bench_graphsage.json")
        self.rows = self.gpu["rows"]
        self.recon = self.gpu.get("reconstructed")
        self.runs = (self.recon or {}).get("runs", {})

    def ceiling(self, row):
        own = self.runs.get(str(row.get("source_run")), {}).get("copy_ceiling_tbps")
        return own or self.gpu["copy_ceiling_tbps"]

    def share(self, row):
        return 100 * row["tbps"] / self.ceiling(row)

    def find(self, op, shape, variant):
        return next((r for r in self.rows
                     if (r["op"], r["shape"], r["variant"]) == (op, shape, variant)), None)


def header(run, shown):
    m, g = run.meta, run.gpu
    get = lambda key, absent="not recorded": m.get(key, absent)
    gpu = get("gpu", f"{g['gpu']} ({g['sms']} SMs)")
    out = ["# samebits GPU baseline", "",
           f"<!-- Generated by `python3 bench/summarize.py {shown}` (`make baseline`) from the raw "
           "JSON in that folder. Do not edit: the CTest test baseline.current fails when this file "
           "differs from what the command prints. -->", "", INTRO, "",
           "| run | date | commit | GPU | copy ceiling | command |", "|---|---|---|---|---|---|",
           f"| {get('run')} | {get('date')} | {get('commit')} | {gpu} | "
           f"{g['copy_ceiling_tbps']:.2f} TB/s | {get('command', 'not recorded (no run.json)')} |",
           ""]
    if run.recon:
        r = run.recon
        out += [r["what"], "", r["rule"], "",
                "| run | date | commit | copy ceiling | command |", "|---|---|---|---|---|"]
        for k, v in sorted(run.runs.items(), key=lambda kv: int(kv[0])):
            tbps = v.get("copy_ceiling_tbps")
            ceil = f"{tbps:.2f} TB/s" if tbps else "not recorded"
            commit = v.get("commit") or f"not recorded (entry in {v['recorded_in']})"
            out.append(f"| {k} | {v['date']} | {commit} | {ceil} | `{v['command']}` |")
        out += ["", "Not reconstructed: " + "; ".join(r["not_reconstructed"]) + ".", "",
                "Older than later changes to their path: " + "; ".join(r["stale"]) + ".", "",
                r["reported_then"], ""]
    return out


def family_table(run, fam):
    """One row per op and shape, one column per variant (atomic first, else the run's order)."""
    rows = [r for r in run.rows if r["family"] == fam and "[" not in r["variant"]
            and r["op"] not in OWN_TABLES and r["ms"] > 0]
    if not rows:
        return ["No rows in this run.", ""]
    variants = list(dict.fromkeys((r["variant"], r["level"]) for r in rows))
    variants.sort(key=lambda v: LEVELS.index(v[1]) if v[1] in LEVELS else len(LEVELS))
    keys = list(dict.fromkeys((r["op"], r["shape"]) for r in rows))
    with_runs = any("source_run" in r for r in rows)
    head = ["op", "shape"] + [f"{v} ({lv})" for v, lv in variants]
    head += ["portable / cuBLAS"] if fam == "gemm" else []
    head += ["run"] if with_runs else []
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for op, shape in keys:
        cells, seen = [op, shape], []
        for v, lv in variants:
            r = next((x for x in rows if (x["op"], x["shape"], x["variant"], x["level"]) ==
                      (op, shape, v, lv)), None)
            if r is None:
                cells.append("")
                continue
            seen.append(r)
            extra = []
            if r["ratio_to_atomic"] > 0 and lv != NG:
                extra.append(f"{r['ratio_to_atomic']:.2f}x")
            # a plan built alone writes no output; a host cost per call moves no bytes
            if fam not in ("gemm", "overhead") and "alone" not in v:
                extra.append(f"{run.share(r):.0f}%")
            cells.append(ms(r["ms"]) + (f" ({', '.join(extra)})" if extra else ""))
        if fam == "gemm":
            t, c = run.find(op, shape, "cuda.tiled"), run.find(op, shape, "cuda.cublas")
            ok = t and c and c["ms"] > 0 and same_run(t, c)
            cells.append(f"{t['ms'] / c['ms']:.2f}x" if ok else "-")
        if with_runs:
            cells.append(", ".join(str(x) for x in sorted({r["source_run"] for r in seen})))
        out.append("| " + " | ".join(cells) + " |")
    overrides = [r for r in run.rows if r["family"] == fam and "[" in r["variant"]]
    if overrides:
        out += ["", "Other launch configurations of the portable variant (same bits): " + "; ".join(
            f"{r['op']} {r['shape']} {r['variant'].split('[')[1].rstrip(']')}: {ms(r['ms'])} ms"
            for r in overrides) + "."]
    return out + [""]


def scatter_vs_torch(run):
    torch = run.torch
    tsrc = (torch or {}).get("reconstructed", {}).get("source_run")
    out = ["| op | shape | atomic ms | sort every call (portable) | run_to_run every call | plan "
           "reused | same index again (automatic reuse) | torch default | torch deterministic | "
           "run_to_run / torch det |", "|---|---|---|---|---|---|---|---|---|---|"]
    ratios = {k: [] for k in ("sort", "r2r", "plan", "again", "vs_torch_det")}
    for op in ("index_add", "scatter_add"):
        for a in ANCHORS:
            sel = {r["variant"]: r for r in run.rows
                   if r["op"] == op and shape_key(r["shape"]) == a}
            at, so = sel.get("cuda.atomic"), sel.get("cuda.sort_pull")
            pl = sel.get("cuda.plan_pull (plan reused)")
            ag = sel.get("cuda.sort_pull (same index again)")
            if at is None or so is None:
                continue
            # What a run_to_run call runs: the fixed-point sum where it takes the shape, else the
            # sort.
            fx = sel.get("cuda.fixed_point")
            rr = fx or so
            td = tdd = None
            if torch:
                t = torch["price"].get(f"E={a[0]} N={a[1]} F={a[2]}", {})
                td, tdd = t.get(f"{op} det=False"), t.get(f"{op} det=True")
            for key, r in (("sort", so), ("r2r", rr), ("plan", pl), ("again", ag)):
                if r and same_run(r, at):
                    ratios[key].append(r["ms"] / at["ms"])
            vs = None
            if isinstance(tdd, (int, float)) and same_run(rr.get("source_run"), tsrc):
                vs = rr["ms"] / tdd
                ratios["vs_torch_det"].append(vs)
            x = lambda r, how="": (f" ({r['ms'] / at['ms']:.2f}x{how})"
                                   if r and same_run(r, at) else "")
            cells = [op, f"E={a[0]} N={a[1]} F={a[2]}", ms(at["ms"]), ms(so["ms"]) + x(so),
                     ms(rr["ms"]) + x(rr, ", fixed point" if fx else ", sort"),
                     ms(pl and pl["ms"]) + x(pl), ms(ag and ag["ms"]) + x(ag), ms(td), ms(tdd),
                     "-" if vs is None else f"{vs:.3f}"]
            out.append("| " + " | ".join(cells) + " |")
    g = {k: gmean(v) for k, v in ratios.items()}
    out += ["", "Geometric means over the anchor shapes: "
            f"sort every call / atomic = {g['sort']:.2f}x; "
            f"run_to_run every call / atomic = {g['r2r']:.2f}x; "
            f"plan reused / atomic = {g['plan']:.2f}x; "
            f"same index again (automatic reuse) / atomic = {g['again']:.2f}x; "
            f"run_to_run every call / PyTorch deterministic = {g['vs_torch_det']:.2f}x.", ""]
    return out


def titled_table(title, head, cells):
    """A line of text, then a Markdown table of one row per entry of `cells`; nothing when empty."""
    if not cells:
        return []
    return ([title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(row) + " |" for row in cells] + [""])


def gemm_extras(run):
    """The portable kernel's launch configurations, its accuracy against cuBLAS, and the bf16
    batch-invariant GEMM against cuBLAS's per-m heuristic, as the benchmark wrote them."""
    of = lambda op: [r for r in run.rows if r["op"] == op]
    return (titled_table("Launch configurations of cuda.tiled (same bits; only the time moves):",
                         ["shape", "ms", "launch, GFLOP/s"],
                         [[r["shape"], ms(r["ms"]), r.get("note", "")] for r in of(GEMM_TUNING)])
            + titled_table("Accuracy (largest |error| over sum |a||b| against a float64 "
                           "reference):", ["shape", "variant", "error"],
                           [[r["shape"], r["variant"], r.get("note", "")]
                            for r in of(GEMM_ACCURACY)])
            + titled_table("bf16 GEMM, batch-invariant (one algorithm for every m) against "
                           "cuBLAS's choice per m:", ["shape", "variant", "level", "ms", "note"],
                           [[r["shape"], r["variant"], r["level"],
                             ms(r["ms"]) if r["ms"] > 0 else "-", r.get("note", "")]
                            for r in of(GEMM_BF16)]))


SANITIZE_LINE = re.compile(
    r"sanitize (\S+)\s+(\S+)\s+(\d+) run\(s\): (\d+) errors, (\d+) tests passed, (\d+) failed, "
    r"(\d+) timed out, (\d+) other exits, longest (\d+) s")
SANITIZE_TOOLS = ["memcheck", "racecheck", "synccheck", "initcheck"]


def sanitizers(path):
    """compute-sanitizer's four tools on every GPU test program, one row per program, from the
    run's sanitize_summary.txt (bench/device.sh's per-program lines), or none without one."""
    f = os.path.join(path, "sanitize_summary.txt")
    if not os.path.exists(f):
        return []
    cells = {}
    for line in open(f):
        m = SANITIZE_LINE.match(line.strip())
        if not m:
            continue
        tool, prog = m.group(1), m.group(2)
        runs, errors, passed, failed, timed_out, other, longest = map(int, m.groups()[2:])
        parts = [f"{errors} errors" if tool != "racecheck" else f"{errors} hazards"]
        if failed:
            parts.append(f"{failed} failed")
        if timed_out:
            parts.append(f"{timed_out} of {runs} timed out")
        if other:
            parts.append(f"{other} exits with errors")
        ok = not (errors or failed or timed_out or other)
        cells[(prog, tool)] = ", ".join(parts) + ("" if ok else " (check)")
    return [[prog] + [cells.get((prog, t), "not run") for t in SANITIZE_TOOLS]
            for prog in sorted({p for p, _ in cells})]


def ceiling_shares(run):
    out = ["| op | shape | variant | ms | % of copy ceiling |", "|---|---|---|---|---|"]
    for r in run.rows:
        k = shape_key(r["shape"])
        if (r["family"] in ("scatter", "segment") and k and k[0] * max(k[2], 1) >= 64_000_000
                and r["level"] != NG and "alone" not in r["variant"]):
            out.append(f"| {r['op']} | {r['shape']} | {r['variant']} | {ms(r['ms'])} | "
                       f"{run.share(r):.0f}% |")
    return out + [""]


def portable_geomeans(run):
    by_op = {}
    for r in run.rows:
        if (r["level"] == PO and r["ratio_to_atomic"] > 0 and "[" not in r["variant"]
                and "alone" not in r["variant"] and "again" not in r["variant"]):
            by_op.setdefault(r["op"], []).append(r["ratio_to_atomic"])
    out = ["| op | portable / atomic (geomean) | shapes |", "|---|---|---|"]
    out += [f"| {op} | {gmean(xs):.2f}x | {len(xs)} |" for op, xs in by_op.items()]
    allx = [x for xs in by_op.values() for x in xs]
    return out + ["", f"All portable rows: geometric mean {gmean(allx):.2f}x the atomic variant "
                  f"({len(allx)} rows).", ""]


def training(e):
    rec = e.get("reconstructed", {})
    c = e.get("config", {})
    out = [f"Training (`samebits experiment graphsage`, {c.get('runs')} runs of "
           f"{c.get('epochs')} epochs{', run ' + str(rec['source_run']) if rec else ''}):", "",
           "| device | level | runs | distinct weight sets | test accuracy (mean) | ms per run |",
           "|---|---|---|---|---|---|"]
    for g in e["groups"]:
        acc = (g.get("test_accuracy") or {}).get("mean")
        sec = g.get("seconds_per_run")
        out.append(f"| {g['device']} | {g['level']} | {g['runs']} | {g['distinct_weight_sets']} | "
                   f"{'-' if acc is None else f'{acc:.4f}'} | "
                   f"{'-' if sec is None else ms(1e3 * sec)} |")
    if rec.get("seconds_per_1000_runs"):
        out.append(f"\n{rec['seconds_per_1000_runs']} s per 1000 runs (every level).")
    x = e.get("cross_device", {})
    if x.get("applicable") and x.get("portable_hashes"):
        hashes = ", ".join(f"{d} {h}" for d, h in x["portable_hashes"].items())
        same = "identical" if x.get("equal") else "different"
        out.append(f"\nPortable weights per device: {hashes} ({same}).")
    return out + [""]


def inference(inf, torch):
    rows = inf["rows"] if isinstance(inf, dict) else inf
    tinf = (torch or {}).get("inference_ms", {})
    out = ["Inference (`samebits bench graphsage`, one forward pass, median; CUDA graph replay on "
           "the GPU; PyTorch timed in the same call):", "",
           "| graph | device | not_guaranteed | run_to_run | portable | PyTorch index_add model, "
           "default / deterministic | PyG SAGEConv, default / deterministic |",
           "|---|---|---|---|---|---|---|"]
    for g, d in dict.fromkeys((r["graph"], r["device"]) for r in rows):
        lv = {r["level"]: r["median_ms"] for r in rows if (r["graph"], r["device"]) == (g, d)}
        base = lv.get(NG)
        tkey = "cora" if g == "cora" else "synthetic N=1M E=20M F=128 H=128"

        def cell(level):
            if level not in lv:
                return "-"
            return ms(lv[level]) + (f" ({lv[level] / base:.2f}x)" if base and level != NG else "")

        def pair(model):
            return " / ".join(ms(tinf.get(f"{tkey} {model} det={b}")) for b in (False, True))

        out.append(f"| {g} | {d} | {cell(NG)} | {cell(RR)} | {cell(PO)} | {pair('IaSage')} | "
                   f"{pair('PygSage')} |")
    return out + [""]


OVERHEAD_OPS = [("index_add", "index_add"), ("index_add_plan", "index_add with a plan"),
                ("index_add_ng", "index_add, not_guaranteed"), ("scatter_add", "scatter_add"),
                ("index_select", "index_select"), ("gather", "gather"), ("cumsum", "cumsum"),
                ("sum", "sum"), ("mm", "mm")]


def us(x):
    return f"{x:.1f}" if isinstance(x, (int, float)) else "-"


def python_package(b):
    """samebits.torch against torch in one call (python/bench/bench_torch.py's JSON): the host's
    cost per call on tiny CUDA inputs, and the anchor shapes at run_to_run against torch's default
    and deterministic modes, and against the C++ figure of the same call where it was given."""
    ov = b.get("overhead_us", {})
    cells = [[label, us(r.get("torch")), us(r.get("samebits")), us(r.get("deferred")),
              us(r.get("extra")), us(r.get("extra_deferred"))]
             for key, label in OVERHEAD_OPS if (r := ov.get(key))]
    out = titled_table("Per call on tiny CUDA inputs, microseconds (median; \"deferred\": index "
                       "checks deferred, the drop-in mode's default; \"extra\": over torch's own "
                       "op):", ["op", "torch", "samebits.torch", "deferred", "extra",
                                "extra, deferred"], cells)
    rows = []
    for a in b.get("anchors", []):
        cpp = a.get("loop_vs_cpp")
        rows.append([a["op"], a["shape"], ms(a.get("torch_default_ms")),
                     ms(a.get("torch_deterministic_ms")), ms(a.get("samebits_run_to_run_ms")),
                     f"{a['samebits_run_to_run_ms'] / a['torch_deterministic_ms']:.2f}x",
                     "-" if cpp is None else f"{cpp:.2f}x"])
    out += titled_table("Anchor shapes, ms (samebits.torch at run_to_run, every call sorting; "
                        "\"/ det\": over torch's deterministic mode; \"/ C++\": the same index "
                        "passed again in a loop, over samebits_bench_gpu's figure of this call):",
                        ["op", "shape", "torch default", "torch deterministic", "samebits.torch",
                         "/ det", "/ C++"], rows)
    return out


PYG_MODES = [("torch", "torch default"), ("torch_det", "torch deterministic"),
             ("run_to_run", "samebits run_to_run"), ("portable", "samebits portable"),
             ("run_to_run_python", "samebits run_to_run, Python kernels")]


def pyg_models(ref, own, python_kernels=None):
    """PyG's own models on Cora under the drop-in mode (examples/pyg_cora.py's JSON): ms per
    training and distinct weight sets per mode (python_kernels: the mode with its Python kernels
    for every op, as SAMEBITS_TORCH_MODE=python runs it), and SAGEConv inference on the synthetic
    graph."""
    rows = (ref or {}).get("rows", []) + (own or {}).get("rows", [])
    rows += [dict(r, mode=r["mode"] + "_python") for r in (python_kernels or {}).get("rows", [])]
    by = {(r["model"], r["mode"]): r for r in rows}
    cells = []
    for model in dict.fromkeys(r["model"] for r in rows):
        base = by.get((model, "torch"), {}).get("ms")

        def cell(mode):
            r = by.get((model, mode))
            if r is None:
                return "-"
            x = f", {r['ms'] / base:.2f}x" if base and mode != "torch" else ""
            return f"{ms(r['ms'])}{x} ({r['distinct']} of {r['runs']})"
        cells.append([model] + [cell(m) for m, _ in PYG_MODES])
    epochs = (ref or own or {}).get("epochs")
    out = titled_table(f"PyG's models on Cora, ms per training of {epochs} epochs, x torch default "
                       "(distinct weight sets of runs):", ["model"] + [t for _, t in PYG_MODES],
                       cells)
    spread = []
    for model in dict.fromkeys(r["model"] for r in rows):
        base = by.get((model, "torch"), {}).get("round_ms")
        for mode, title in PYG_MODES[1:]:
            mine = by.get((model, mode), {}).get("round_ms")
            if base and mine and len(mine) == len(base):
                q = sorted(m / b for m, b in zip(mine, base))
                spread.append([model, title, str(len(q)), f"{q[0]:.3f}", f"{q[len(q) // 2]:.3f}",
                               f"{q[-1]:.3f}"])
    if spread:
        out += titled_table("The same trainings round by round (the modes interleaved), each "
                            "round's ms per training over torch default's in that round:",
                            ["model", "mode", "rounds", "min", "median", "max"], spread)
    syn = (ref or {}).get("synthetic") or (own or {}).get("synthetic")
    if syn:
        out += titled_table("SAGEConv inference on the synthetic graph (1M nodes, 20M edges, 128 "
                            "features), ms (outputs that differ of repeats):",
                            [t for m, t in PYG_MODES if m in syn],
                            [[f"{ms(syn[m]['ms'])} ({syn[m]['differ']} of {syn[m]['reps']})"
                              for m, _ in PYG_MODES if m in syn]])
    return out


def summarize(path, shown):
    run = Run(path)
    out = header(run, shown)
    out += ["## Headline ratios", "", "### Scatter family against PyTorch, anchor shapes", ""]
    out += scatter_vs_torch(run)
    out += ["### Portable variants against our atomic variant (geometric mean per op)", ""]
    out += portable_geomeans(run)
    out += ["### Share of the copy ceiling, large scatter and segment shapes", ""]
    out += ceiling_shares(run)
    out += ["## Op families", ""]
    for fam, title in FAMILIES:
        out += [f"### {title}", ""] + family_table(run, fam)
        if fam == "gemm":
            out += gemm_extras(run)
    out += titled_table("### Probes of the hardware\n\nWhat an instruction computes, for the "
                        "designs that would use it:", ["probe", "shape", "finding"],
                        [[r["op"], r["shape"], r.get("note", "")]
                         for r in run.rows if r["family"] == "probe"])
    out += ["## GraphSAGE", ""]
    if run.experiment:
        out += training(run.experiment)
    if run.inference:
        out += inference(run.inference, run.torch)
    if not run.experiment and not run.inference:
        out += ["No experiment_cuda.json or bench_graphsage.json in this run.", ""]
    package = load(path, "bench_torch.json")
    pyg_ref, pyg_own = load(path, "pyg_reference.json"), load(path, "pyg_samebits.json")
    pyg_py = load(path, "pyg_python_kernels.json")
    if package or pyg_ref or pyg_own:
        out += ["## samebits.torch", ""]
        if package:
            out += python_package(package)
        if pyg_ref or pyg_own:
            out += pyg_models(pyg_ref, pyg_own, pyg_py)
    out += titled_table("## compute-sanitizer\n\nEach tool on every GPU test program (processes "
                        "per test or case shard as bench/device.sh runs them; the run folder's "
                        "README says what a \"check\" cell found):",
                        ["program"] + SANITIZE_TOOLS, sanitizers(path))
    extra = {k: run.torch[k] for k in ("env", "copy_TBps", "sum_TBps") if k in (run.torch or {})}
    if extra:
        out += ["PyTorch in the same call: " + json.dumps(extra, sort_keys=True), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def shown_path(path):
    """The run folder as the baseline names it: relative to the repository when inside it."""
    full = os.path.abspath(path)
    rel = os.path.relpath(full, ROOT)
    return (full if rel.startswith("..") else rel).replace(os.sep, "/").rstrip("/")


def check(baseline):
    text = open(baseline).read()
    m = re.search(r"Generated by `python3 bench/summarize\.py (\S+)`", text)
    if not m:
        sys.exit(f"{baseline}: no 'Generated by' line naming its run")
    path = m.group(1) if os.path.isabs(m.group(1)) else os.path.join(ROOT, m.group(1))
    fresh = summarize(path, m.group(1))
    if fresh == text:
        print(f"{baseline} is what `python3 bench/summarize.py {m.group(1)}` prints")
        return 0
    sys.stdout.writelines(list(difflib.unified_diff(
        text.splitlines(True), fresh.splitlines(True), baseline, "regenerated"))[:60])
    print(f"\n{baseline} differs from its regenerated text: run `make baseline` "
          "(never edit it by hand)")
    return 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    sys.stdout.write(summarize(sys.argv[1], shown_path(sys.argv[1])))

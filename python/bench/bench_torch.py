"""samebits.torch against torch's own ops: per-call overhead on tiny inputs, and the anchor shapes
(docs: /work/shared/docs/anchors.md) at run_to_run against torch default and torch deterministic.

    python python/bench/bench_torch.py [--device cuda] [--out bench_torch.json] [--quick]

Times are medians over repeats (CUDA events on the GPU, perf_counter on the CPU). "raw" is the
samebits._core binding called directly on the same tensors: the C++ op plus the binding, without
the Python wrapper (its route, output allocation and argument handling), with waiting and with
deferred checks ("raw def"); the difference to "samebits" is what the wrapper adds. On CUDA the
device work of one call of each tiny op (torch's and samebits' with deferred checks) is listed
too: kernels and memsets a call and their device time, and the CUDA runtime calls the host made
for it, from torch.profiler.
"""
import argparse
import json
import statistics
import sys
import time

import torch

import samebits
import samebits.torch as st
from samebits import _core


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def loop_us(fn, device, calls):
    """Wall time per call of one loop of `calls` calls, then a synchronize, in microseconds: on the
    GPU with tiny inputs this is the host-side cost, launches included."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / calls * 1e6


def per_call_us(configs, device, calls, rounds=7):
    """Per-call time of each (name, fn, deferred) configuration: `rounds` rounds, each timing one
    loop of every configuration in turn, so that a slow stretch of the host falls on all of them;
    the figure is a configuration's fastest loop (the host's cost without the interruptions)."""
    for _, fn, deferred in configs:  # warm-up
        with samebits.index_checks("deferred" if deferred else "wait"):
            for _ in range(20):
                fn()
    _sync(device)
    loops = {name: [] for name, _, _ in configs}
    for _ in range(rounds):
        for name, fn, deferred in configs:
            with samebits.index_checks("deferred" if deferred else "wait"):
                loops[name].append(loop_us(fn, device, calls))
    return {name: min(v) for name, v in loops.items()}


def device_work(fn, device, calls=20):
    """Kernels and memsets one call launches on the GPU (names and counts per call) and their
    device time per call in microseconds, from torch.profiler over `calls` calls."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    _sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        _sync(device)
    names, runtime, device_us = {}, {}, 0.0
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            if e.name.startswith("cuda"):  # the CUDA runtime calls the host made
                runtime[e.name] = runtime.get(e.name, 0) + 1
            continue
        names[e.name] = names.get(e.name, 0) + 1
        device_us += e.time_range.elapsed_us()
    return {"launches": sum(names.values()) / calls, "device_us": device_us / calls,
            "names": {n: c / calls for n, c in sorted(names.items())},
            "runtime_calls": {n: c / calls for n, c in sorted(runtime.items())}}


def op_ms(fn, device, repeats):
    """Median time of one call in milliseconds (CUDA events on the GPU)."""
    for _ in range(3):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _stream(t):
    return torch._C._cuda_getCurrentRawStream(t.get_device()) if t.is_cuda else 0


def tiny_cases(device):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 4, generator=g).to(device)
    idx = torch.randint(0, 16, (32,), generator=g).to(device)
    src = torch.randn(32, 4, generator=g).to(device)
    gidx = idx[:, None].expand(32, 4).contiguous()
    a, b = torch.randn(8, 8, generator=g).to(device), torch.randn(8, 8, generator=g).to(device)
    v = torch.randn(64, generator=g).to(device)
    out = torch.empty_like(x)
    s = _stream(x)
    plan = st.IndexPlan(idx, x.shape[0])
    core_plan = _core.IndexPlan(idx, x.shape[0], s)
    sel = torch.empty(32, 4, device=device)
    scan, total, prod = torch.empty_like(v), torch.empty((), device=device), torch.empty_like(a)
    return {
        "index_add": (lambda: torch.index_add(x, 0, idx, src),
                      lambda: st.index_add(x, 0, idx, src, level="run_to_run"),
                      lambda: (out.copy_(x), _core.index_add(out, idx, src, 1.0, "run_to_run", s))),
        # The same index_add without the per-call sort and index check: through a plan built once
        # (no host round trip), and at not_guaranteed (atomics).
        "index_add_plan": (lambda: torch.index_add(x, 0, idx, src),
                           lambda: plan.index_add(x, src, level="run_to_run"),
                           lambda: (out.copy_(x), core_plan.index_add(out, src, 1.0, "run_to_run",
                                                                      s))),
        "index_add_ng": (lambda: torch.index_add(x, 0, idx, src),
                         lambda: st.index_add(x, 0, idx, src, level="not_guaranteed"),
                         lambda: (out.copy_(x), _core.index_add(out, idx, src, 1.0,
                                                                "not_guaranteed", s))),
        "scatter_add": (lambda: torch.scatter_add(x, 0, gidx, src),
                        lambda: st.scatter_add(x, 0, gidx, src, level="run_to_run"),
                        lambda: (out.copy_(x), _core.scatter_add(out, 0, gidx, src, "run_to_run",
                                                                 s))),
        "index_select": (lambda: torch.index_select(src, 0, idx),
                         lambda: st.index_select(src, 0, idx, level="run_to_run"),
                         lambda: _core.index_select(src, 0, idx, sel, "run_to_run", s)),
        "gather": (lambda: torch.gather(src, 0, gidx), lambda: st.gather(src, 0, gidx),
                   lambda: _core.gather(src, 0, gidx, sel, None, s)),
        "cumsum": (lambda: torch.cumsum(v, 0), lambda: st.cumsum(v, 0, level="run_to_run"),
                   lambda: _core.cumsum(v, 0, scan, "run_to_run", s)),
        "sum": (lambda: torch.sum(v), lambda: st.sum(v, level="run_to_run"),
                lambda: _core.sum(v, total, "run_to_run", s)),
        "mm": (lambda: torch.mm(a, b), lambda: st.mm(a, b, level="run_to_run"),
               lambda: _core.gemm(False, False, 1.0, a, b, 0.0, prod, "run_to_run", s)),
    }


ANCHORS = [(10_000_000, 1_000_000, 1), (2_000_000, 100_000, 64), (2_000_000, 1000, 64),
           (1_000_000, 2708, 128)]


def _short(v):
    """A count as samebits_bench_gpu writes it in its shapes: 10M, 100k, 2708."""
    if v >= 1_000_000 and v % 1_000_000 == 0:
        return f"{v // 1_000_000}M"
    if v >= 100_000 and v % 1000 == 0:
        return f"{v // 1000}k"
    return str(v)


def cpp_ms(rows, op, e, n, f):
    """The C++ figure (samebits_bench_gpu's JSON rows) for what an anchor call runs: the same index
    every call, so the fixed-point sums for rows of at most 4 floats and otherwise the sort and pull
    of an index passed again (its plan reused after the comparison; index_add's row serves
    scatter_add too, whose expanded index takes the same rows path). None when the file has no
    such row."""
    shape = f"E={_short(e)} N={_short(n)} F={f}"
    variant = "cuda.fixed_point" if f <= 4 else "cuda.sort_pull (same index again)"
    for want_op in (op, "index_add"):
        for r in rows:
            if r.get("op") == want_op and r.get("shape") == shape and r.get("variant") == variant:
                return r["ms"]
    return None


def anchor_cases(device, quick):
    for e, n, f in ANCHORS:
        if quick:
            e, n = e // 1000, max(n // 1000, 1)
        g = torch.Generator().manual_seed(2)
        idx = torch.randint(0, n, (e,), generator=g).to(device)
        src = torch.randn(e, f, generator=g).to(device)
        x = torch.zeros(n, f, device=device)
        gidx = idx[:, None].expand(e, f)
        name = f"E={e},N={n},F={f}"
        yield name, "index_add", (e, n, f), (lambda: torch.index_add(x, 0, idx, src),
                                  lambda: st.index_add(x, 0, idx, src, level="run_to_run"))
        yield name, "scatter_add", (e, n, f), (lambda: torch.scatter_add(x, 0, gidx, src),
                                    lambda: st.scatter_add(x, 0, gidx, src, level="run_to_run"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="bench_torch.json")
    parser.add_argument("--quick", action="store_true", help="small shapes, few repeats (smoke)")
    parser.add_argument("--cpp", help="samebits_bench_gpu's JSON of the same machine and call: the "
                        "anchors' loop figures are compared with its C++ figures")
    args = parser.parse_args()
    device = torch.device(args.device)
    calls, repeats = (200, 5) if args.quick else (1000, 20)
    result = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "samebits": samebits.__version__,
              "git_revision": _core.git_revision(), "overhead_us": {}, "anchors": []}
    print(f"per-call time on tiny inputs ({device}), microseconds")
    print("(samebits: index checks that wait, the default; deferred: samebits.index_checks("
          "'deferred'), the drop-in mode's default)")
    print(f"{'op':14s} {'torch':>8s} {'samebits':>9s} {'deferred':>9s} {'raw':>8s} {'raw def':>8s} "
          f"{'extra':>8s} {'extra def':>9s}")
    for op, (ref, ours, raw) in tiny_cases(device).items():
        configs = [("torch", ref, False), ("samebits", ours, False), ("deferred", ours, True)]
        if raw:
            configs += [("raw", raw, False), ("raw_deferred", raw, True)]
        t = per_call_us(configs, device, calls)
        t_ref, t_ours, t_def = t["torch"], t["samebits"], t["deferred"]
        t_raw, t_raw_def = t.get("raw"), t.get("raw_deferred")
        result["overhead_us"][op] = {"torch": t_ref, "samebits": t_ours, "deferred": t_def,
                                     "raw": t_raw, "raw_deferred": t_raw_def,
                                     "extra": t_ours - t_ref, "extra_deferred": t_def - t_ref}
        raw_text = (f"{t_raw:8.2f} {t_raw_def:8.2f}" if t_raw is not None
                    else f"{'-':>8s} {'-':>8s}")
        print(f"{op:14s} {t_ref:8.2f} {t_ours:9.2f} {t_def:9.2f} {raw_text} {t_ours - t_ref:8.2f} "
              f"{t_def - t_ref:9.2f}")
    if device.type == "cuda":
        print("\ndevice work per call on tiny inputs: launches (kernels and memsets) and device "
              "time in us; samebits with deferred checks")
        result["device_work"] = {}
        for op, (ref, ours, _) in tiny_cases(device).items():
            theirs = device_work(ref, device)
            with samebits.index_checks("deferred"):
                mine = device_work(ours, device)
            result["device_work"][op] = {"torch": theirs, "samebits_deferred": mine}
            print(f"{op:14s} torch {theirs['launches']:4.1f} launches {theirs['device_us']:6.2f} us"
                  f" | samebits {mine['launches']:4.1f} launches {mine['device_us']:6.2f} us: "
                  + ", ".join(f"{n} x{c:g}" for n, c in mine["names"].items()))
            print(f"{'':14s} runtime calls: torch "
                  + ", ".join(f"{n} x{c:g}" for n, c in theirs["runtime_calls"].items())
                  + " | samebits " + ", ".join(f"{n} x{c:g}"
                                              for n, c in mine["runtime_calls"].items()))
    print(f"\nanchor shapes ({device}), ms: torch default, torch deterministic, samebits "
          "run_to_run (one call between events), the same back to back with deferred checks")
    cpp_rows = []
    if args.cpp:
        with open(args.cpp) as f:
            cpp_rows = json.load(f).get("rows", [])
    for shape, op, (e, n, f), (ref, ours) in anchor_cases(device, args.quick):
        t_default = op_ms(ref, device, repeats)
        torch.use_deterministic_algorithms(True)
        try:
            t_det = op_ms(ref, device, repeats)
        finally:
            torch.use_deterministic_algorithms(False)
        t_ours = op_ms(ours, device, repeats)
        # Back to back with deferred checks, as a training loop calls it: the host's work for a
        # call overlaps the device's for the one before (the events above also time the Python
        # wrapper's work before the first kernel starts).
        t_loop = per_call_us([("loop", ours, True)], device, max(repeats, 10), rounds=3)["loop"] / 1e3
        row = {"shape": shape, "op": op, "torch_default_ms": t_default,
               "torch_deterministic_ms": t_det, "samebits_run_to_run_ms": t_ours,
               "samebits_deferred_loop_ms": t_loop, "vs_deterministic": t_det / t_ours}
        cpp = cpp_ms(cpp_rows, op, e, n, f)
        versus = ""
        if cpp is not None:
            row.update(cpp_ms=cpp, loop_vs_cpp=t_loop / cpp)
            versus = f", loop {t_loop / cpp:.2f}x C++'s {cpp:.3f}"
        result["anchors"].append(row)
        print(f"{op:12s} {shape:24s} {t_default:8.3f} {t_det:8.3f} {t_ours:8.3f} {t_loop:8.3f}  "
              f"(samebits takes {t_ours / t_det:.2f}x torch deterministic's time{versus})")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

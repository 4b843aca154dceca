"""Host time per call of the ops a PyG training on Cora spends its time in under the drop-in mode
(SAGEConv's and GCNConv's message passing: E=10556 edges into N=2708 nodes, rows of 1433, 16 and
7 floats), layer by layer: torch's own op, the same call under samebits.torch.deterministic, the
samebits.torch function the mode calls, and the samebits._core binding alone (deferred index
checks, the mode's default, for the three samebits layers). Each call starts on an idle device (a
synchronize before it, outside the timing); the figure is the median host time until the call
returns: what the host spends to issue it, the critical path of a training bound by its launches.
The differences between layers say where the mode's extra host time goes. On CUDA the device
time of one call of torch's op and of the binding is listed too (torch.profiler).

For the scatters two more layers split the binding's time: `atomic`, the binding at
not_guaranteed (samebits' one atomic launch, no sort), and `plan`, an index_add through an
IndexPlan built beforehand (the pull alone: no sort, no comparison with a kept index). raw - plan
is what a short index's device-side comparison with the kept sorts costs the host (its launch
included), plan - launch what samebits' dispatch costs beyond one launch; `launch` is the host
time of one of torch's smallest launches (an add_ on 16 floats), the floor of any call.

    python python/bench/host_cost.py --json out/host_cost.json
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

import samebits
import samebits.torch as st
from samebits import _core
from samebits.torch import _ops

LEVEL = "run_to_run"
LAYERS = ("torch", "mode", "wrapper", "raw")
SPLIT = ("atomic", "plan")  # the scatters' binding, split (see the docstring)


def host_us(fn, device, calls):
    """Median host microseconds of one call of fn, each started on an idle device."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(calls):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return statistics.median(times)


def cases(device, edges, nodes, widths):
    """name -> {layer: call}: PyG's scatter of messages (scatter_add_ with the index expanded
    over the features), index_add_, the gather of messages (index_select) and the backward of
    indexing the training nodes (index_put_ with accumulate, by row numbers and by a mask)."""
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, nodes, (edges,), generator=g).to(device)
    s = _ops._stream(idx)
    plan = _core.IndexPlan(idx, nodes, s)
    out = {}
    for f in widths:
        src = torch.randn(edges, f, generator=g).to(device)
        x = torch.randn(nodes, f, generator=g).to(device)
        acc = torch.zeros(nodes, f, device=device)
        eidx = idx.view(-1, 1).expand_as(src)
        sel = torch.empty(edges, f, device=device)
        split = {
            "atomic": lambda acc=acc, src=src: _core.index_add(acc, idx, src, 1.0,
                                                              "not_guaranteed", s),
            "plan": lambda acc=acc, src=src: plan.index_add(acc, src, 1.0, LEVEL, s)}
        out[f"scatter_add_ F={f}"] = {
            "torch": lambda acc=acc, eidx=eidx, src=src: acc.scatter_add_(0, eidx, src),
            "wrapper": lambda acc=acc, src=src: _ops._index_add_into(acc, 0, idx, src, 1.0, LEVEL),
            "raw": lambda acc=acc, src=src: _core.index_add(acc, idx, src, 1.0, LEVEL, s), **split}
        out[f"index_add_ F={f}"] = {
            "torch": lambda acc=acc, src=src: acc.index_add_(0, idx, src),
            "wrapper": lambda acc=acc, src=src: _ops._index_add_into(acc, 0, idx, src, 1.0, LEVEL),
            "raw": lambda acc=acc, src=src: _core.index_add(acc, idx, src, 1.0, LEVEL, s), **split}
        out[f"index_select F={f}"] = {
            "torch": lambda x=x: x.index_select(0, idx),
            "wrapper": lambda x=x: st.index_select(x, 0, idx, level=LEVEL),
            "raw": lambda x=x, sel=sel: _core.index_select(x, 0, idx, sel, LEVEL, s)}
    # The backward of out[train_mask] (140 training nodes of Cora, 7 classes): index_put_ with
    # accumulate=True, which the mode runs as an index_add of rows.
    train = min(140, nodes)
    rows = torch.randperm(nodes, generator=g)[:train].to(device)
    vals = torch.randn(train, 7, generator=g).to(device)
    grad = torch.zeros(nodes, 7, device=device)
    out["index_put_ accumulate F=7"] = {
        "torch": lambda: grad.index_put_((rows,), vals, accumulate=True),
        "wrapper": lambda: _ops._index_add_into(grad, 0, rows, vals, 1.0, LEVEL),
        "raw": lambda: _core.index_add(grad, rows, vals, 1.0, LEVEL, s)}
    # The same backward as autograd calls it, with the mask: torch counts the mask's elements
    # (nonzero, a wait for the device); the mode's C++ kernel sizes the rows by the values.
    mask = torch.zeros(nodes, dtype=torch.bool)
    mask[rows.cpu()] = True
    mask = mask.to(device)
    out["index_put_ mask F=7"] = {
        "torch": lambda: torch.ops.aten._index_put_impl_(grad, [mask], vals, True, True),
        "wrapper": lambda: _ops._index_add_into(grad, 0, rows, vals, 1.0, LEVEL),
        "raw": lambda: _core.index_add(grad, rows, vals, 1.0, LEVEL, s)}
    for calls in out.values():
        calls["mode"] = calls["torch"]  # the same torch call, run inside the mode
    return out


def device_us(fn, device):
    """Device time of one call's kernels and memsets (torch.profiler; CUDA only, else None)."""
    if device.type != "cuda":
        return None
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_torch import device_work
    return device_work(fn, device)["device_us"]


def measure(device, calls, edges, nodes, widths):
    rows, kernels = {}, {}
    for name, fns in cases(device, edges, nodes, widths).items():
        row = {"torch": host_us(fns["torch"], device, calls)}
        with st.deterministic(level=LEVEL):
            row["mode"] = host_us(fns["mode"], device, calls)
        with samebits.index_checks("deferred"):
            for layer in ("wrapper", "raw") + SPLIT:
                if layer in fns:
                    row[layer] = host_us(fns[layer], device, calls)
            kernels[name] = {"torch": device_us(fns["torch"], device),
                             "raw": device_us(fns["raw"], device)}
        rows[name] = row
    small = torch.zeros(16, device=device)
    launch = host_us(lambda: small.add_(1.0), device, calls)
    return rows, kernels, launch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=200, help="timed calls per op and layer")
    ap.add_argument("--quick", action="store_true", help="small shapes and few calls (a test)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    device = torch.device(a.device)
    edges, nodes, widths, calls = 10556, 2708, (1433, 16, 7), a.calls
    if a.quick:
        edges, nodes, widths, calls = 300, 40, (5,), 5
    rows, kernels, launch = measure(device, calls, edges, nodes, widths)
    print(f"host time per call ({device}, E={edges} N={nodes}), microseconds, median of {calls}; "
          f"mode - torch is the mode's extra host time")
    print(f"{'op':22s}" + "".join(f"{c:>9s}" for c in LAYERS) + f"{'mode-torch':>11s}"
          f"{'mode-wrap':>10s}{'wrap-raw':>9s}")
    for name, r in rows.items():
        print(f"{name:22s}" + "".join(f"{r[c]:9.2f}" for c in LAYERS) +
              f"{r['mode'] - r['torch']:11.2f}{r['mode'] - r['wrapper']:10.2f}"
              f"{r['wrapper'] - r['raw']:9.2f}")
    print(f"the scatters' binding split; launch, the floor of any call: torch's add_ on 16 "
          f"floats, {launch:.2f} us")
    print(f"{'op':22s}{'raw':>9s}{'atomic':>9s}{'plan':>9s}{'raw-plan':>10s}{'plan-launch':>12s}")
    for name, r in rows.items():
        if "plan" in r:
            print(f"{name:22s}{r['raw']:9.2f}{r['atomic']:9.2f}{r['plan']:9.2f}"
                  f"{r['raw'] - r['plan']:10.2f}{r['plan'] - launch:12.2f}")
    if device.type == "cuda":
        print("device time per call (kernels and memsets, torch.profiler), microseconds")
        for name, k in kernels.items():
            print(f"{name:22s} torch {k['torch']:8.2f}   samebits raw {k['raw']:8.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": str(device), "edges": edges, "nodes": nodes, "calls": calls,
                       "level": LEVEL, "host_us": rows, "device_us": kernels,
                       "launch_us": launch}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What torch's deterministic setting costs the host, op by op, in a PyG training on Cora.

samebits' drop-in mode turns torch.use_deterministic_algorithms on (so that an op it does not
replace throws rather than vary); the ops it leaves to torch then run with torch's setting on.
This records every aten call of one training epoch (a TorchDispatchMode), replays the first call
of each op with the setting on and off in turns, and reports the host time per call (calls issued
back to back, the device waited for only between batches) and the difference times the op's
calls per epoch. Ops the mode replaces are marked: under the mode samebits runs them, not torch.

    python python/bench/flag_cost.py --model gcn --json out/flag_cost.json
"""
import argparse
import collections
import json
import os
import statistics
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import pyg_cora  # noqa: E402  (the example's loader and training loop)

st = pyg_cora.st


class Recorder(TorchDispatchMode):
    """Every aten call that runs inside it, with its arguments."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((func, args, kwargs))
        return func(*args, **kwargs)


def record_epoch(model, data, nf, nc):
    """One training epoch's aten calls (the first training step of train_once)."""
    rec = Recorder()
    with rec:
        pyg_cora.train_once(model, data, nf, nc, 1)
    return rec.calls


def per_call_us(func, args, kwargs, calls, sync):
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        func(*args, **kwargs)
    t1 = time.perf_counter()
    sync()
    return (t1 - t0) / calls * 1e6


def schema_name(func):
    """The op's name as samebits.torch.covered_ops() lists it: aten::index_add,
    aten::scatter_reduce.two."""
    name = func._schema.name
    overload = func._schema.overload_name
    return f"{name}.{overload}" if overload else name


def flag_costs(calls, repeat, batch, sync, covered, fill=False):
    """Per op: calls per epoch, median host us per call with the setting on and off, and whether
    samebits' mode replaces it. An op that throws with the setting on is reported as such. `fill`
    is torch's filling of uninitialized memory while the setting is on (the mode leaves it off;
    torch's own deterministic mode turns it on)."""
    counts = collections.Counter(str(f) for f, _, _ in calls)
    first = {}
    for func, args, kwargs in calls:
        first.setdefault(str(func), (func, args, kwargs))
    was = torch.are_deterministic_algorithms_enabled()
    was_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = fill
    rows = []
    try:
        for name, (func, args, kwargs) in first.items():
            on, off, error = [], [], None
            with torch.no_grad():  # replays of in-place updates of leaves
                for turn in range(repeat):
                    try:
                        # on then off, then off then on: neither setting always goes first
                        for setting in pyg_cora.turn_order((True, False), turn):
                            torch.use_deterministic_algorithms(setting)
                            (on if setting else off).append(
                                per_call_us(func, args, kwargs, batch, sync))
                    except RuntimeError as e:
                        error = str(e).splitlines()[0][:120]
                        break
            row = dict(op=name, calls=counts[name], replaced=schema_name(func) in covered,
                       error=error)
            if not error:
                row.update(on_us=statistics.median(on), off_us=statistics.median(off))
                row["cost_us"] = counts[name] * (row["on_us"] - row["off_us"])
            rows.append(row)
    finally:
        torch.use_deterministic_algorithms(was)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill
    rows.sort(key=lambda r: -r.get("cost_us", 0.0))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gcn", choices=("sage", "gcn", "gat"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=7,
                    help="turns of the setting on and off per op; the median is the figure (7)")
    ap.add_argument("--batch", type=int, default=40, help="calls timed back to back a turn (40)")
    ap.add_argument("--fill", action="store_true",
                    help="torch's filling of uninitialized memory on with the setting, as in "
                         "torch's deterministic mode (samebits' mode leaves it off)")
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "data", "cora"))
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.batch < 1:
        ap.error("--repeat and --batch must be at least 1")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda needs a CUDA device (--device cpu runs on the CPU)")
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    data, nf, nc = pyg_cora.load_cora_tsv(args.device, args.data)
    covered = set(st.covered_ops())
    rows = flag_costs(record_epoch(args.model, data, nf, nc), args.repeat, args.batch, sync,
                      covered, args.fill)
    print(f"host us per call with torch's deterministic setting on and off, {args.model} on "
          f"{args.device}, median of {args.repeat} turns of {args.batch} calls, fill of "
          f"uninitialized memory {'on' if args.fill else 'off'}")
    print(f"{'aten op':<44} {'calls':>6} {'on':>9} {'off':>9} {'cost/epoch':>11}  mode")
    for r in rows:
        mode = "samebits" if r["replaced"] else "torch"
        if r["error"]:
            print(f"{r['op']:<44} {r['calls']:>6} throws with the setting on: {r['error']}")
            continue
        print(f"{r['op']:<44} {r['calls']:>6} {r['on_us']:9.2f} {r['off_us']:9.2f} "
              f"{r['cost_us']:11.1f}  {mode}")
    left = sum(r.get("cost_us", 0.0) for r in rows if not r["replaced"])
    print(f"cost per epoch of the ops the mode leaves to torch: {left:.1f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=args.model, device=args.device, repeat=args.repeat,
                           batch=args.batch, fill=args.fill, torch=torch.__version__, rows=rows,
                           left_to_torch_us=left), f, indent=1)


if __name__ == "__main__":
    main()

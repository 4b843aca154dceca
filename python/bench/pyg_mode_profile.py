"""Where the drop-in mode's time goes in a PyG training on Cora: the time per training in torch's
default, torch's deterministic mode and samebits' mode, each with and without torch's filling of
uninitialized memory (torch.utils.deterministic.fill_uninitialized_memory: torch's mode turns it
on, samebits' leaves it off), samebits' with waiting index checks, and two that split the mode's
cost (its own atomics at not_guaranteed; run_to_run with torch's deterministic setting off for the
ops samebits leaves to torch), then torch.profiler's tables
(self CPU and self CUDA time per op and kernel) for one training in the default and in the mode,
and per outermost aten op (autograd's backward ops included) its calls, CPU time with everything it
calls, and the CUDA runtime calls it makes (launches, memsets, copies, synchronizations), the
default against the mode side by side: where the mode's extra host work and launches are.
Trainings are timed one by one, the configurations interleaved in rounds; the median is the
figure (the mean and the medians of each half show the spread). Then the same training without
its waits (the training nodes as an index, no evaluation): the host's time to issue it against the
wall time to its end, which says whether the mode's extra time is host work or device work.

    python python/bench/pyg_mode_profile.py --model sage --runs 30 --json out/pyg_profile.json
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import pyg_cora  # noqa: E402  (the example's loader and training loop)

st = pyg_cora.st


class Config:
    """One way to train: torch default, torch deterministic or samebits' mode (at `level`), with
    torch's fill of uninitialized memory on or off, samebits' index checks deferred or waiting,
    and (`torch_flag=False`) torch's deterministic setting turned back off inside the mode, so
    that the ops samebits leaves to torch take torch's default kernels."""

    def __init__(self, name, mode, fill=None, index_checks="deferred", level="run_to_run",
                 torch_flag=True):
        self.name, self.mode, self.fill, self.index_checks = name, mode, fill, index_checks
        self.level, self.torch_flag = level, torch_flag

    def __enter__(self):
        self.was_fill = torch.utils.deterministic.fill_uninitialized_memory
        if self.mode == "torch_det":
            torch.use_deterministic_algorithms(True)
        elif self.mode == "samebits":
            st.enable(self.level, index_checks=self.index_checks)
            if not self.torch_flag:
                torch.use_deterministic_algorithms(False)
        if self.fill is not None:  # None: as torch's mode (on) or samebits' mode (off) sets it
            torch.utils.deterministic.fill_uninitialized_memory = self.fill

    def __exit__(self, *exc):
        torch.utils.deterministic.fill_uninitialized_memory = self.was_fill
        if self.mode == "samebits":
            st.disable()
        torch.use_deterministic_algorithms(False)


CONFIGS = (Config("torch default", "torch"),
           Config("torch deterministic", "torch_det"),
           Config("torch deterministic, no fill", "torch_det", fill=False),
           Config("samebits run_to_run", "samebits"),
           Config("samebits run_to_run, torch's fill", "samebits", fill=True),
           Config("samebits run_to_run, waiting checks", "samebits", index_checks="wait"),
           # Where the mode's cost lies: its own atomics (the mode's plumbing, no sort), and
           # run_to_run with torch's deterministic setting off for the ops it leaves to torch.
           Config("samebits not_guaranteed (atomics)", "samebits", level="not_guaranteed",
                  torch_flag=False),
           Config("samebits run_to_run, torch's flag off", "samebits", torch_flag=False))


def time_configs(configs, model, data, nf, nc, runs, epochs, rounds):
    """Each configuration's trainings, timed one by one (a synchronize after each) and interleaved:
    `rounds` rounds, each training every configuration runs // rounds times in turn (in reverse
    order every other round: pyg_cora.turn_order), so that a slow stretch of the machine falls on
    all of them. Returns per configuration the median and mean ms per training, the medians of
    the rounds' halves (a spread), and distinct weight sets."""
    per = max(runs // rounds, 1)
    times = {cfg.name: [] for cfg in configs}
    hashes = {cfg.name: set() for cfg in configs}
    for cfg in configs:  # warm-up: every path compiled and allocated once
        with cfg:
            pyg_cora.train_once(model, data, nf, nc, epochs)
    torch.cuda.synchronize()
    for r in range(rounds):
        for cfg in pyg_cora.turn_order(configs, r):
            with cfg:
                for _ in range(per):
                    t0 = time.perf_counter()
                    hashes[cfg.name].add(pyg_cora.train_once(model, data, nf, nc, epochs)[0])
                    torch.cuda.synchronize()
                    times[cfg.name].append((time.perf_counter() - t0) * 1e3)
    out = []
    for cfg in configs:
        t = times[cfg.name]
        half = len(t) // 2
        out.append(dict(config=cfg.name, ms=statistics.median(t), mean_ms=statistics.fmean(t),
                        first_half_ms=statistics.median(t[:half] or t),
                        second_half_ms=statistics.median(t[half:]),
                        distinct=len(hashes[cfg.name]), runs=len(t)))
    return out


def train_unsynced(model, data, nf, nc, epochs, train_idx):
    """train_once's loop with the training nodes as an index tensor instead of a mask (a mask's
    nonzero waits for the device) and no evaluation: nothing in it waits for the GPU."""
    torch.manual_seed(0)
    net = pyg_cora.make_model(model, nf, nc).to(data.x.device)
    opt = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=5e-4)
    y = data.y[train_idx]
    for _ in range(epochs):
        net.train()
        opt.zero_grad()
        out = net(data.x, data.edge_index)
        torch.nn.functional.cross_entropy(out[train_idx], y).backward()
        opt.step()


def issue_times(configs, model, data, nf, nc, runs, epochs, rounds=5):
    """Per configuration, the median host time to issue one training that never waits for the
    device (train_unsynced), and its wall time up to the device's end: a host-bound training has
    wall = issue, and the mode's extra host work shows as extra issue time; a device-bound one has
    wall > issue, and its extra device time shows as extra wall time. The configurations take
    turns in `rounds` rounds, as in time_configs, so that a slow stretch of the host falls on all
    of them."""
    train_idx = data.train_mask.nonzero().flatten()
    per = max(runs // rounds, 1)
    issue = {cfg.name: [] for cfg in configs}
    wall = {cfg.name: [] for cfg in configs}
    for cfg in configs:  # warm-up
        with cfg:
            train_unsynced(model, data, nf, nc, epochs, train_idx)
            torch.cuda.synchronize()
    for r in range(rounds):
        for cfg in pyg_cora.turn_order(configs, r):
            with cfg:
                for _ in range(per):
                    t0 = time.perf_counter()
                    train_unsynced(model, data, nf, nc, epochs, train_idx)
                    t1 = time.perf_counter()
                    torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    issue[cfg.name].append((t1 - t0) * 1e3)
                    wall[cfg.name].append((t2 - t0) * 1e3)
    return [dict(config=cfg.name, issue_ms=statistics.median(issue[cfg.name]),
                 wall_ms=statistics.median(wall[cfg.name])) for cfg in configs]


def profile_config(cfg, model, data, nf, nc, epochs, rows):
    from torch.profiler import ProfilerActivity, profile
    with cfg:
        pyg_cora.train_once(model, data, nf, nc, epochs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            pyg_cora.train_once(model, data, nf, nc, epochs)
            torch.cuda.synchronize()
    per_op = outer_ops(prof.events())
    avg = prof.key_averages()
    kernels = sum(e.count for e in avg if e.device_type == torch.autograd.DeviceType.CUDA)
    out = {"kernels": kernels,
           "self_cpu_ms": sum(e.self_cpu_time_total for e in avg) / 1e3,
           "self_cuda_ms": sum(e.self_device_time_total for e in avg) / 1e3,
           "by_cpu": avg.table(sort_by="self_cpu_time_total", row_limit=rows),
           "by_cuda": avg.table(sort_by="self_cuda_time_total", row_limit=rows),
           "per_op": per_op}
    return out


RUNTIME = {"cudaLaunchKernel": "launches", "cudaLaunchKernelExC": "launches",
           "cudaMemsetAsync": "memsets", "cudaMemcpyAsync": "copies",
           "cudaStreamSynchronize": "syncs", "cudaEventSynchronize": "syncs",
           "cudaDeviceSynchronize": "syncs"}


def outer_ops(events):
    """Per outermost aten op (no aten op above it): calls, CPU us with its callees, and the CUDA
    runtime calls made inside it by kind, summed over the training."""
    table = {}
    for e in events:
        if not e.name.startswith("aten::"):
            continue
        up = e.cpu_parent
        while up is not None and not up.name.startswith("aten::"):
            up = up.cpu_parent
        if up is not None:
            continue
        row = table.setdefault(e.name, {"calls": 0, "cpu_us": 0.0, "launches": 0, "memsets": 0,
                                        "copies": 0, "syncs": 0})
        row["calls"] += 1
        row["cpu_us"] += e.cpu_time_total
        todo = list(e.cpu_children)
        while todo:
            c = todo.pop()
            kind = RUNTIME.get(c.name)
            if kind:
                row[kind] += 1
            todo.extend(c.cpu_children)
    return table


def per_op_table(base, mode):
    """The outer ops whose CPU time or runtime calls differ, default against the mode."""
    names = sorted(set(base) | set(mode), key=lambda n: -(mode.get(n, {}).get("cpu_us", 0)
                                                           - base.get(n, {}).get("cpu_us", 0)))
    empty = {"calls": 0, "cpu_us": 0.0, "launches": 0, "memsets": 0, "copies": 0, "syncs": 0}
    lines = [f"{'outermost aten op':<34} {'calls':>11} {'CPU us':>17} {'launches':>11} "
             f"{'memsets':>9} {'copies':>9} {'syncs':>9}   (default / mode)"]
    for n in names:
        b, m = base.get(n, empty), mode.get(n, empty)
        if all(b[k] == m[k] for k in ("calls", "launches", "memsets", "copies", "syncs")) and \
                abs(m["cpu_us"] - b["cpu_us"]) < 100:
            continue
        lines.append(f"{n[6:]:<34} {b['calls']:>5}/{m['calls']:<5} {b['cpu_us']:>8.0f}/"
                     f"{m['cpu_us']:<8.0f} {b['launches']:>5}/{m['launches']:<5} "
                     f"{b['memsets']:>4}/{m['memsets']:<4} {b['copies']:>4}/{m['copies']:<4} "
                     f"{b['syncs']:>4}/{m['syncs']:<4}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="sage", choices=("sage", "gcn", "gat"))
    ap.add_argument("--runs", type=int, default=30, help="timed trainings per configuration (30)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved rounds the trainings are split into (5)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--rows", type=int, default=30, help="rows of each profiler table (30)")
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "data", "cora"))
    ap.add_argument("--json", help="write the figures and tables as JSON")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")
    data, nf, nc = pyg_cora.load_cora_tsv("cuda", args.data)
    timings = time_configs(CONFIGS, args.model, data, nf, nc, args.runs, args.epochs, args.rounds)
    base = timings[0]["ms"]
    print(f"{'configuration':<40} {'median':>8} {'x torch':>8} {'mean':>8} {'1st half':>9} "
          f"{'2nd half':>9}  ms per training, {args.rounds} interleaved rounds")
    for r in timings:
        print(f"{r['config']:<40} {r['ms']:8.2f} {r['ms'] / base:8.3f} {r['mean_ms']:8.2f} "
              f"{r['first_half_ms']:9.2f} {r['second_half_ms']:9.2f}  {r['distinct']} distinct of "
              f"{r['runs']}", flush=True)
    unsynced = issue_times((CONFIGS[0], CONFIGS[1], CONFIGS[3], CONFIGS[6], CONFIGS[7]),
                           args.model, data, nf, nc, max(args.runs // 2, 1), args.epochs,
                           args.rounds)
    print("\n== host issue time and wall time of a training that never waits (ms, median)")
    for r in unsynced:
        print(f"{r['config']:<40} issue {r['issue_ms']:8.2f}   wall {r['wall_ms']:8.2f}")
    profiles = {}
    for cfg in (CONFIGS[0], CONFIGS[3]):
        p = profile_config(cfg, args.model, data, nf, nc, args.epochs, args.rows)
        profiles[cfg.name] = p
        print(f"\n== {cfg.name}: {p['kernels']} kernels, self CPU {p['self_cpu_ms']:.2f} ms, "
              f"self CUDA {p['self_cuda_ms']:.2f} ms per training")
        print(p["by_cpu"])
        print(p["by_cuda"])
    print("\n== per outermost aten op, one training: torch default / samebits run_to_run")
    print(per_op_table(profiles[CONFIGS[0].name]["per_op"], profiles[CONFIGS[3].name]["per_op"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=args.model, epochs=args.epochs, timings=timings,
                           unsynced=unsynced, profiles=profiles), f, indent=1)


if __name__ == "__main__":
    main()

"""Where the drop-in mode's time goes in a PyG training on Cora: the time per training in torch's
default, torch's deterministic mode and samebits' mode, each with and without torch's filling of
uninitialized memory (torch.utils.deterministic.fill_uninitialized_memory: torch's mode turns it
on, samebits' leaves it off), and samebits' with waiting index checks, then torch.profiler's tables
(self CPU and self CUDA time per op and kernel) for one training in the default and in the mode.
Trainings are timed one by one, the configurations interleaved in rounds; the median is the
figure (the mean and the medians of each half show the spread).

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
    """One way to train: torch default, torch deterministic or samebits' mode, with torch's fill of
    uninitialized memory on or off, and samebits' index checks deferred or waiting."""

    def __init__(self, name, mode, fill=None, index_checks="deferred"):
        self.name, self.mode, self.fill, self.index_checks = name, mode, fill, index_checks

    def __enter__(self):
        self.was_fill = torch.utils.deterministic.fill_uninitialized_memory
        if self.mode == "torch_det":
            torch.use_deterministic_algorithms(True)
        elif self.mode == "samebits":
            st.enable("run_to_run", index_checks=self.index_checks)
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
           Config("samebits run_to_run, waiting checks", "samebits", index_checks="wait"))


def time_configs(configs, model, data, nf, nc, runs, epochs, rounds):
    """Each configuration's trainings, timed one by one (a synchronize after each) and interleaved:
    `rounds` rounds, each training every configuration runs // rounds times in turn, so that a
    slow stretch of the machine falls on all of them. Returns per configuration the median and
    mean ms per training, the medians of the rounds' halves (a spread), and distinct weight sets."""
    per = max(runs // rounds, 1)
    times = {cfg.name: [] for cfg in configs}
    hashes = {cfg.name: set() for cfg in configs}
    for cfg in configs:  # warm-up: every path compiled and allocated once
        with cfg:
            pyg_cora.train_once(model, data, nf, nc, epochs)
    torch.cuda.synchronize()
    for _ in range(rounds):
        for cfg in configs:
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


def profile_config(cfg, model, data, nf, nc, epochs, rows):
    from torch.profiler import ProfilerActivity, profile
    with cfg:
        pyg_cora.train_once(model, data, nf, nc, epochs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            pyg_cora.train_once(model, data, nf, nc, epochs)
            torch.cuda.synchronize()
    avg = prof.key_averages()
    kernels = sum(e.count for e in avg if e.device_type == torch.autograd.DeviceType.CUDA)
    out = {"kernels": kernels,
           "self_cpu_ms": sum(e.self_cpu_time_total for e in avg) / 1e3,
           "self_cuda_ms": sum(e.self_device_time_total for e in avg) / 1e3,
           "by_cpu": avg.table(sort_by="self_cpu_time_total", row_limit=rows),
           "by_cuda": avg.table(sort_by="self_cuda_time_total", row_limit=rows)}
    return out


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
    profiles = {}
    for cfg in (CONFIGS[0], CONFIGS[3]):
        p = profile_config(cfg, args.model, data, nf, nc, args.epochs, args.rows)
        profiles[cfg.name] = p
        print(f"\n== {cfg.name}: {p['kernels']} kernels, self CPU {p['self_cpu_ms']:.2f} ms, "
              f"self CUDA {p['self_cuda_ms']:.2f} ms per training")
        print(p["by_cpu"])
        print(p["by_cuda"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=args.model, epochs=args.epochs, timings=timings,
                           profiles=profiles), f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarize an `ncu --csv --page raw` log with the SpeedOfLight, Occupancy, LaunchStats and
WarpStateStats sections: per kernel name, its launches, median duration, launch shape, registers,
achieved occupancy, the SMs' active share of the elapsed cycles, and the warp stall reasons that
take the most cycles per issued instruction. Used by `bench/device.sh pygncu` to say why a short
kernel takes the time it does.

    python3 bench/ncu_summary.py ncu.csv [--stalls 4]
"""
import argparse
import csv
import re
import statistics
import sys

STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
COLUMNS = (  # (heading, metric, scale)
    ("us", "gpu__time_duration.sum", 1e-3),
    ("grid", "launch__grid_size", 1),
    ("block", "launch__block_size", 1),
    ("regs", "launch__registers_per_thread", 1),
    ("occ %", "sm__warps_active.avg.pct_of_peak_sustained_active", 1),
    ("SM active %", None, 1),  # smsp__cycles_active.avg / sm__cycles_elapsed.avg
    ("cyc/inst", "smsp__average_warp_latency_per_inst_issued.ratio", 1),
)


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def read_rows(path):
    """The data rows of the CSV as dicts (ncu mixes its own messages into stdout; the row after
    the header holds the units)."""
    with open(path, newline="", errors="replace") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = list(csv.DictReader(lines))
    return [r for r in rows if number(r.get("ID", "")) is not None]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --csv --page raw output")
    ap.add_argument("--stalls", type=int, default=4, help="stall reasons shown per kernel (4)")
    a = ap.parse_args(argv)
    try:
        rows = read_rows(a.csv)
    except OSError as e:
        print(f"{a.csv}: {e.strerror}", file=sys.stderr)
        return 1
    if not rows:
        print(f"{a.csv}: no kernel rows (did ncu run? see the .err file beside it)")
        return 1
    by = {}
    for r in rows:
        by.setdefault(r.get("Kernel Name", "?")[:70], []).append(r)
    print(f"{'kernel':<70} {'n':>3} " + " ".join(f"{h:>11}" for h, _, _ in COLUMNS))
    for name, rs in by.items():
        cells = []
        for _, metric, scale in COLUMNS:
            if metric is None:
                v = [number(r.get("smsp__cycles_active.avg")) for r in rs]
                e = [number(r.get("sm__cycles_elapsed.avg")) for r in rs]
                v = [100 * x / y for x, y in zip(v, e) if x is not None and y]
            else:
                v = [number(r.get(metric)) for r in rs]
                v = [x * scale for x in v if x is not None]
            cells.append(f"{statistics.median(v):>11.2f}" if v else f"{'-':>11}")
        print(f"{name:<70} {len(rs):>3} " + " ".join(cells))
        stalls = {}
        for key in rs[0]:
            m = STALL.match(key)
            if m:
                v = [number(r.get(key)) for r in rs]
                v = [x for x in v if x is not None]
                if v:
                    stalls[m.group(1)] = statistics.median(v)
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:a.stalls]
        if top:
            print(f"{'':<70}     stalls (cycles per issued instruction): " +
                  ", ".join(f"{k} {v:.1f}" for k, v in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())

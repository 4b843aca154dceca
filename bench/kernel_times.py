#!/usr/bin/env python3
"""Summarize an `ncu --csv --metrics gpu__time_duration.sum` log: per kernel name, how many
launches, the median and total GPU time. Used by `bench/device.sh profile` to show where the time
of one forward pass goes.

    python3 bench/kernel_times.py ncu.csv [--title TEXT]
"""
import argparse
import csv
import statistics
import sys
from collections import OrderedDict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --csv output")
    ap.add_argument("--title", default="", help="heading printed above the table")
    args = ap.parse_args()
    rows = []
    with open(args.csv, newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu mixes its own messages into stdout
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            rows.append((r["Kernel Name"], float(r["Metric Value"].replace(",", ""))))
        except (KeyError, ValueError):
            continue
    if not rows:
        print(f"{args.csv}: no gpu__time_duration rows (did ncu run?)")
        return 1
    by = OrderedDict()
    for name, ns in rows:
        by.setdefault(name[:90], []).append(ns)
    print(f"## {args.title}: {len(rows)} kernel launches")
    print(f"{'kernel':<90} {'count':>6} {'median us':>10} {'total us':>10}")
    for name, v in by.items():
        print(f"{name:<90} {len(v):>6} {statistics.median(v) / 1e3:>10.2f} {sum(v) / 1e3:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

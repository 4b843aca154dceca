#!/usr/bin/env python3
"""CTest bench.ncu_summary_reads_a_raw_page: bench/ncu_summary.py on a made-up `ncu --csv --page
raw` log (ncu's messages mixed in, a units row, two launches of one kernel, one of another): the
medians, the SMs' active share and the largest stall reasons it prints (no GPU, no ncu)."""
import contextlib
import io
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_summary  # noqa: E402

STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
HEAD = ["ID", "Kernel Name", "gpu__time_duration.sum", "launch__grid_size", "launch__block_size",
        "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__cycles_active.avg", "sm__cycles_elapsed.avg",
        "smsp__average_warp_latency_per_inst_issued.ratio",
        STALL.format("long_scoreboard"), STALL.format("barrier"), STALL.format("wait")]
UNITS = ["", "", "nsecond", "", "", "register/thread", "%", "cycle", "cycle", "", "", "", ""]
ROWS = [
    ["0", "void pull_group_kernel<float, 0, 4, 16>(Pull<float>, int, PullReport)", "10,000",
     "43", "256", "40", "20", "2000", "10000", "30", "20", "1", "3"],
    ["1", "void pull_group_kernel<float, 0, 4, 16>(Pull<float>, int, PullReport)", "14,000",
     "43", "256", "40", "30", "4000", "10000", "34", "24", "3", "4"],
    ["2", "fixed_cluster_kernel<true>", "9,000", "8", "1024", "63", "50", "5000", "10000",
     "12", "1", "8", "3"],
]


def csv_line(cells):
    return ",".join(f'"{c}"' for c in cells) + "\n"


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "ncu.csv")
    with open(path, "w") as f:
        f.write("==PROF== Connected to process 1\n")
        f.write(csv_line(HEAD) + csv_line(UNITS) + "".join(csv_line(r) for r in ROWS))
        f.write("==PROF== Disconnected from process 1\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = ncu_summary.main([path, "--stalls", "2"])
    text = out.getvalue()

lines = text.splitlines()
pull = next((line for line in lines if line.startswith("void pull_group_kernel")), "")
fixed = next((line for line in lines if line.startswith("fixed_cluster_kernel<true>")), "")
checks = [
    (rc == 0, "exit status 0"),
    (pull.split()[-8:] == ["2", "12.00", "43.00", "256.00", "40.00", "25.00", "30.00", "32.00"],
     f"pull row: launches, median us, grid, block, regs, occupancy, SM active %, cyc/inst: {pull}"),
    (fixed.split()[-8:] == ["1", "9.00", "8.00", "1024.00", "63.00", "50.00", "50.00", "12.00"],
     f"cluster row: {fixed}"),
    ("long_scoreboard 22.0, wait 3.5" in text, "the pull's two largest stalls, medians"),
    ("barrier 8.0, wait 3.0" in text, "the cluster's two largest stalls"),
]
failed = [what for ok, what in checks if not ok]
for what in failed:
    print(f"FAIL {what}")
if failed:
    print(text)
print(f"{len(checks) - len(failed)} of {len(checks)} checks")
sys.exit(1 if failed else 0)

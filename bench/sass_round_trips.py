#!/usr/bin/env python3
"""Memory round trips along a kernel's SASS listing, a static count.

    python3 bench/sass_round_trips.py BINARY FUNCTION_REGEX
    python3 bench/sass_round_trips.py --check BINARY     the pull kernels' limit (CTest)

BINARY: an executable, object, cubin or library with SASS; bench/sass.py says where cuobjdump
comes from and ARCH picks the architecture (sm_90 by default).

The model: one thread issues the listing in order, top to bottom, ignoring branches (so a kernel
with two versions of a loop walks both). An instruction issues one cycle after the one before it,
or later when a source register is not ready yet; a global or generic load (LDG, LD) makes its
destination ready a memory latency after it issues, any other instruction one cycle after. The
figure is the issue time of the last instruction in memory latencies: the round trips that one
warp waits for in a row. Loads whose addresses are all known are issued back to back and cost one
round trip together; a load that needs a value that another load brings costs one more. The
group pull of Cora's short scatters (src/cuda/scatter_pull.cuh) scored 35 with each row load
beside the next row number's load, 8 with the batch's 16 row numbers loaded first.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass import check_or_list, cuobjdump, functions  # noqa: E402

LATENCY = 10000  # cycles: far above a listing's length, so that the count is in round trips
NO_DESTINATION = ("ST", "RED", "BRA", "EXIT", "BAR", "MEMBAR", "ERRBAR", "BSSY", "BSYNC", "NOP",
                  "CGAERRBAR", "RET", "CALL", "YIELD", "WARPSYNC", "DEPBAR", "CCTL", "FENCE")


def registers(operand):
    """The R registers an operand reads: R8, R8.64 (R8 and R9), [R2.64+0x8], -|R3|."""
    out = []
    for m in re.finditer(r"\bR(\d+)(\.64)?", operand):
        r = int(m.group(1))
        out += [r, r + 1] if m.group(2) else [r]
    return out


def round_trips(instructions):
    """The memory round trips along `instructions` (SASS text, one instruction each)."""
    ready, t = {}, 0
    for ins in instructions:
        ins = re.sub(r"^@!?U?P\w+\s+", "", ins)  # predicate
        parts = ins.split(None, 1)
        opcode = parts[0]
        operands = [o.strip() for o in parts[1].split(",")] if len(parts) > 1 else []
        dest = None
        if operands and not opcode.startswith(NO_DESTINATION):
            m = re.match(r"R(\d+)$", operands[0])
            dest = int(m.group(1)) if m else None
        sources = operands[1:] if dest is not None else operands
        t = max([t + 1] + [ready.get(r, 0) for o in sources for r in registers(o)])
        if dest is not None:
            width = (4 if ".128" in opcode else
                     2 if ".64" in opcode or ".WIDE" in opcode or opcode.startswith("D") else 1)
            delay = LATENCY if re.match(r"(LDG|LD)\.", opcode) else 1
            for k in range(width):
                ready[dest + k] = t + delay
    return t / LATENCY


# --check: the group pull (sum, float; one and four floats a load; 4, 8 and 16 rows a batch) and
# the lane pull, at most this many round trips. Each walks its loop once for 32-bit and once for
# 64-bit row numbers, after the check result, the plan's addresses and the target's bounds.
PULLS = [f"_ZN8samebits6detail17pull_group_kernelIfLi0ELi{v}ELi{b}EEEvNS0_4PullIT_EEiNS0_"
         "10PullReportE" for v, b in ((4, 16), (4, 8), (4, 4), (1, 16))]
PULLS.append("_ZN8samebits6detail16pull_lane_kernelIfLi0ELi16EEEvNS0_4PullIT_EEiNS0_10PullReportE")
PULL_LIMIT = 12


def check(binary):
    if cuobjdump() is None:
        print("sass_round_trips: no cuobjdump (make test installs it into .venv): skipped")
        return 77
    funcs = functions(binary, PULLS)
    if not funcs:
        print(f"sass_round_trips: no {os.environ.get('ARCH', 'sm_90')} SASS of the pulls in "
              f"{binary}: skipped")
        return 77
    failed = 0
    for name in PULLS:
        if name not in funcs:
            print(f"FAIL {name}: not in {binary}")
            failed += 1
            continue
        trips = round_trips(funcs[name])
        ok = trips <= PULL_LIMIT
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {trips:5.1f} round trips (at most {PULL_LIMIT})  {name}")
    return 1 if failed else 0


def main():
    return check_or_list("sass_round_trips", __doc__, check,
                         lambda ins, name: f"{round_trips(ins):7.2f} round trips  {name}")


if __name__ == "__main__":
    sys.exit(main())

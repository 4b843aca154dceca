#!/usr/bin/env python3
"""Register-bank conflicts of the FFMAs in a CUDA binary's SASS, a static count.

    python3 bench/sass_bank_conflicts.py BINARY [FUNCTION_REGEX]

BINARY: an executable, object, cubin or library with SASS; FUNCTION_REGEX picks functions by
mangled name (default: gemm_copy_tiles). ARCH (default sm_90) picks the SASS of one GPU
architecture, BANKS the banks of the model below; bench/sass.py says where cuobjdump comes from.

The model: the register file has BANKS banks (2 by default; register Rn is in bank n % BANKS). An
FFMA reads its three sources in one cycle unless two of them share a bank; each further read from
a busy bank costs one more cycle of dispatch. A source whose register the previous instruction
read in the same operand slot with .reuse comes from the reuse cache and reads no bank. The
figure printed, extra reads per FFMA, is then the dispatch cycles an FFMA costs beyond one: the
wide float GEMM kernel that scored 0.385 issued 0.71 instructions a cycle a scheduler under Nsight
Compute on an H100 (1.41 cycles each), bench/results/partial-run147-h100.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass import functions  # noqa: E402


def extra_reads(instructions, banks):
    """(FFMAs, extra bank reads over all of them)."""
    ffma = extra = 0
    cached = {}  # operand slot -> register the previous instruction marked .reuse there
    for ins in instructions:
        ins = re.sub(r"^@!?U?P\w+\s+", "", ins)  # predicate
        if not ins.startswith("FFMA"):
            cached = {}
            continue
        ffma += 1
        sources = [o.strip() for o in ins.split(None, 1)[1].split(",")][1:4]
        per_bank, reuse = {}, {}
        for slot, operand in enumerate(sources):
            m = re.match(r"-?\|?R(\d+)\|?(\.reuse)?", operand)
            if not m:
                continue
            reg = int(m.group(1))
            if m.group(2):
                reuse[slot] = reg
            if cached.get(slot) == reg:
                continue
            per_bank[reg % banks] = per_bank.get(reg % banks, 0) + 1
        cached = reuse
        if per_bank:
            extra += max(per_bank.values()) - 1
    return ffma, extra


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    pattern = re.compile(sys.argv[2] if len(sys.argv) > 2 else "gemm_copy_tiles")
    banks = int(os.environ.get("BANKS", "2"))
    found = False
    for name, instructions in functions(sys.argv[1]).items():
        if not pattern.search(name):
            continue
        found = True
        ffma, extra = extra_reads(instructions, banks)
        if ffma:
            print(f"{ffma:6d} FFMA  {extra / ffma:.3f} extra reads per FFMA ({banks} banks)  {name}")
    if not found:
        sys.exit(f"sass_bank_conflicts: no function matches {pattern.pattern}")


if __name__ == "__main__":
    main()

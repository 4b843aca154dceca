#!/usr/bin/env python3
"""CTest bench.sass_bank_conflicts_counts: bench/sass_bank_conflicts.py's count on instruction
sequences whose extra register reads are worked out by hand (no GPU, no cuobjdump)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_bank_conflicts import extra_reads

CASES = [
    # (instructions, banks, FFMAs, extra reads)
    (["FFMA R0, R1, R3, R5"], 2, 1, 2),  # three odd sources in one of two banks
    (["FFMA R0, R1, R2, R5"], 2, 1, 1),  # two odd, one even
    (["FFMA R0, R1, R2, R3"], 4, 1, 0),  # four banks: all different
    (["FFMA R0, R4, R8, R12"], 4, 1, 2),
    # R1 marked .reuse in slot 0 comes from the cache in the next FFMA: only R3 and R5 are read
    (["FFMA R0, R1.reuse, R2, R4", "FFMA R6, R1, R3, R5"], 2, 2, 1 + 1),
    # the cache holds one slot's register: the same register in another slot is read again
    (["FFMA R0, R1.reuse, R2, R4", "FFMA R6, R3, R1, R5"], 2, 2, 1 + 2),
    # any other instruction between them empties the cache; predicates and non-register
    # operands (immediates, RZ) read no bank
    (["FFMA R0, R1.reuse, R2, R4", "LDS.128 R8, [R9]", "FFMA R6, R1, R3, R5"], 2, 2, 1 + 2),
    (["@P0 FFMA R0, R1, R3, RZ", "FFMA R2, R5, 1.5, R7"], 2, 2, 1 + 1),
    (["IADD3 R0, R1, R3, R5"], 2, 0, 0),
]

failed = 0
for instructions, banks, ffma, extra in CASES:
    got = extra_reads(instructions, banks)
    if got != (ffma, extra):
        failed += 1
        print(f"FAIL {instructions} banks={banks}: got {got}, expected {(ffma, extra)}")
print(f"{len(CASES) - failed} of {len(CASES)} cases")
sys.exit(1 if failed else 0)

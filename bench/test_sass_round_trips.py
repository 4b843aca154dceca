#!/usr/bin/env python3
"""CTest bench.sass_round_trips_counts: bench/sass_round_trips.py's count on instruction sequences
whose round trips are worked out by hand (no GPU, no cuobjdump)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_round_trips import round_trips

CASES = [
    # (instructions, round trips, rounded to one decimal)
    (["IADD3 R0, R1, R2, RZ", "FFMA R3, R0, R0, R0"], 0.0),
    # two loads with known addresses: issued back to back, one round trip
    (["LDG.E R0, desc[UR4][R10.64]", "LDG.E R1, desc[UR4][R12.64]", "FADD R2, R0, R1"], 1.0),
    # a row number, then the row it names: two
    (["LD.E.64 R4, desc[UR4][R10.64]", "LEA R6, P0, R4, R20, 0x2",
      "LDG.E R0, desc[UR4][R6.64]", "FADD R2, R0, R0"], 2.0),
    # two sources loaded number, row, number, row: the second number waits behind the first row's
    # address, so each source costs a round trip after the first
    (["LD.E.64 R4, desc[UR4][R10.64]", "LDG.E R0, desc[UR4][R4.64]",
      "LD.E.64 R6, desc[UR4][R12.64]", "LDG.E R1, desc[UR4][R6.64]", "FADD R2, R0, R1"], 3.0),
    # both numbers first: two round trips for both sources
    (["LD.E.64 R4, desc[UR4][R10.64]", "LD.E.64 R6, desc[UR4][R12.64]",
      "LDG.E R0, desc[UR4][R4.64]", "LDG.E R1, desc[UR4][R6.64]", "FADD R2, R0, R1"], 2.0),
    # a 16-byte load writes four registers; a store and a predicated branch write none;
    # shared-memory and constant loads are not memory round trips
    (["LDG.E.128 R8, desc[UR4][R2.64]", "STG.E desc[UR4][R4.64], R11", "@P0 BRA 0x100",
      "LDS R1, [R0]", "LDC R5, c[0x0][0x210]", "IADD3 R6, R1, R5, RZ"], 1.0),
]

failed = 0
for instructions, expected in CASES:
    got = round(round_trips(instructions), 1)
    if got != expected:
        failed += 1
        print(f"FAIL {instructions}: got {got}, expected {expected}")
print(f"{len(CASES) - failed} of {len(CASES)} cases")
sys.exit(1 if failed else 0)

#!/usr/bin/env python3
"""CTest baseline.summarize_a_measured_run: bench/summarize.py on bench/testdata/fresh_run (a
measured run's files with invented figures, in the schemas of gpu_bench.json, torch.txt and
`bench graphsage --json`, bench_torch.py and pyg_cora.py) reports the ratios worked out by hand below."""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize

out = summarize.summarize(os.path.join(summarize.ROOT, "bench/testdata/fresh_run"), "fixture")
expected = [
    # index_add E=2M N=1000 F=64: atomic 0.8 ms, sort 0.4, same index again 0.3, plan 0.2; PyTorch
    # deterministic 2.0 ms, so run_to_run (the sort: no fixed point at F=64) / torch det = 0.2.
    "sort every call / atomic = 0.50x; run_to_run every call / atomic = 0.50x; plan reused / "
    "atomic = 0.25x; same index again (automatic reuse) / atomic = 0.37x; run_to_run every call / "
    "PyTorch deterministic = 0.20x.",
    "| index_add | E=2000000 N=1000 F=64 | 0.800 | 0.400 (0.50x) | 0.400 (0.50x, sort) | "
    "0.200 (0.25x) | 0.300 (0.37x) | 0.900 | 2.000 | 0.200 |",
    # portable rows: sum 1.0, gemm 1.0, sort 0.5, plan 0.25 (same-again and plan-alone rows out)
    "All portable rows: geometric mean 0.59x the atomic variant (4 rows).",
    # 2^30 bytes in 0.27 ms over a 4.0 TB/s ceiling: 99%; the launch override in its own line
    "| sum | float32 n=2^28 | 0.270 (99%) | 0.270 (1.00x, 99%) |",
    "sum float32 n=2^28 block 64: 0.300 ms.",
    "| gemm | 4096^3 f32 | 6.000 | 3.000 (0.50x) | 6.000 (1.00x) | 2.00x |",
    "| cora | cuda:0 | 0.050 | 0.040 (0.80x) | 0.045 (0.90x) | 0.700 / 1.400 | - / - |",
    "| not recorded | not recorded | not recorded | NVIDIA H200 (132 SMs) | 4.00 TB/s |",
    # rows that are not one timing per variant: a zero-time accuracy row and a launch sweep
    "| f32 [128 x 1031]@[1031 x 128] | cuda.cublas | max |err| / sum|a||b| = 3.92e-08 (first 128 "
    "rows) |",
    "| 4096^3 f32 | 6.500 | 21145 GFLOP/s; wide tiles (128x128), 4 k block(s) of 256 per thread "
    "block, 4 group(s) summed by a second kernel |",
    # compute-sanitizer: one program, two tools run, two not
    "| test_scan_gpu | 0 errors | 2 hazards, 1 of 4 timed out (check) | not run | not run |",
    # a probe's finding, from its note
    # samebits.torch: tiny-call overhead, an anchor against torch's modes and the C++ figure
    "| index_add | 10.0 | 30.0 | 14.0 | 20.0 | 4.0 |",
    "| index_add | E=2000000,N=1000,F=64 | 0.900 | 2.000 | 0.500 | 0.25x | 1.10x |",
    # PyG: the mode at 36 ms against the default's 40 (0.90x), torch's mode 60 (1.50x)
    "| sage | 40.00 (50 of 50) | 60.00, 1.50x (1 of 50) | 36.00, 0.90x (1 of 1000) | - |",
    # round by round: 36/40, 40/50, 33/30
    "| sage | samebits run_to_run | 3 | 0.800 | 0.900 | 1.100 |",
    "| 24.00 (10 of 10) | 18.00 (0 of 10) |",
    "| mma.sync m8n8k4 f64 | 1024 problems of 8x8x4 | of 65536 outputs: 65536 equal the ascending "
    "fma chain, 100 the descending one, 0 neither (layout checked on small integers) |",
]
missing = [e for e in expected if e not in out]
for e in missing:
    print("missing from the output:", e)
if missing:
    print(out)
    sys.exit(1)
print(f"all {len(expected)} expected lines found")

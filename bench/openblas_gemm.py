#!/usr/bin/env python3
"""OpenBLAS's float32 GEMM at 1024^3 through numpy (whose wheels bundle OpenBLAS), the reference
figure for the CPU portable gemm (bench/cpu_gemm.cpp, BM_gemm/m:1024/n:1024/k:1024/.../level:2).

Run with the thread count fixed before numpy loads, for example
  OPENBLAS_NUM_THREADS=2 python3 bench/openblas_gemm.py --reps 20
It prints the best and median real time and the process CPU time per call (all threads), the
figure a machine shared with other work distorts least."""
import argparse
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=1024)
ap.add_argument("--reps", type=int, default=20)
args = ap.parse_args()
rng = np.random.default_rng(1)
a = rng.standard_normal((args.n, args.n), dtype=np.float32)
b = rng.standard_normal((args.n, args.n), dtype=np.float32)
for _ in range(3):
    a @ b
wall, cpu = [], []
for _ in range(args.reps):
    w0, c0 = time.perf_counter(), time.process_time()
    a @ b
    wall.append(time.perf_counter() - w0)
    cpu.append(time.process_time() - c0)
wall.sort()
cpu.sort()
cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
print(f"OpenBLAS ({cfg.get('name')} {cfg.get('version')}) sgemm {args.n}^3: "
      f"real best {wall[0] * 1e3:.1f} ms, median {wall[len(wall) // 2] * 1e3:.1f} ms; "
      f"process CPU best {cpu[0] * 1e3:.1f} ms, median {cpu[len(cpu) // 2] * 1e3:.1f} ms")

#!/usr/bin/env python3
"""The rounding error of gemm's canonical order (include/samebits/ops/gemm.hpp: k in blocks of B,
each block a chain of fmas from +0, the blocks' sums combined by the fixed largest-power-of-two
tree) for block lengths other than samebits' B = 256, on the accuracy shapes of the GPU benchmark
([128 x k] @ [k x 128], k = 1031 and 4096). It simulates the order in float32 with numpy (an fma
as the float64 product, exact for float32 operands, plus the float32 accumulator, rounded once to
float32; the float64 sum can round first where the exponents lie far apart, so a rare last bit may
differ from a true fma) and prints the largest |error| / sum |a||b| against a float64 reference.
With the Python package importable it first checks the simulation at B = 256 against samebits'
own portable mm on the CPU, and says how many outputs differ in their bits.

  .venv/bin/python bench/gemm_block_error.py [--blocks 256,128,64,32] [--k 1031,4096]

The GPU benchmark's rows (bench/BASELINE.md, gemm accuracy) give cuBLAS's figure for the same
measure and shapes."""
import argparse

import numpy as np


def chain(a, b, lo, hi):
    """One canonical block: acc = fma(a[:, j], b[j], acc) for j in [lo, hi), from +0."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for j in range(lo, hi):
        prod = np.outer(a[:, j].astype(np.float64), b[j].astype(np.float64))
        acc = (prod + acc.astype(np.float64)).astype(np.float32)
    return acc


def tree(parts):
    """The blocks' sums combined by the largest-power-of-two split, left before right."""
    if len(parts) == 1:
        return parts[0]
    h = 1
    while 2 * h < len(parts):
        h *= 2
    return (tree(parts[:h]) + tree(parts[h:])).astype(np.float32)


def canonical(a, b, block):
    k = a.shape[1]
    return tree([chain(a, b, s, min(k, s + block)) for s in range(0, k, block)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", default="256,128,64,32", help="block lengths B to simulate")
    ap.add_argument("--k", default="1031,4096", help="inner dimensions")
    ap.add_argument("--size", type=int, default=128, help="m = n")
    ap.add_argument("--seed", type=int, default=1)
    o = ap.parse_args()
    rng = np.random.default_rng(o.seed)
    try:
        import torch
        import samebits.torch as st
    except ImportError:
        st = None
    print(f"[{o.size} x k] @ [k x {o.size}] float32, seed {o.seed}: max |error| / sum |a||b|")
    for k in map(int, o.k.split(",")):
        a = rng.standard_normal((o.size, k)).astype(np.float32)
        b = rng.standard_normal((k, o.size)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        if st is not None:
            ours = st.mm(torch.from_numpy(a), torch.from_numpy(b), level="portable").numpy()
            same = np.count_nonzero(ours.view(np.uint32) == canonical(a, b, 256).view(np.uint32))
            print(f"  k = {k}: the simulation at B = 256 gives samebits' bits in {same} of "
                  f"{ours.size} outputs")
        for block in map(int, o.blocks.split(",")):
            err = np.max(np.abs(canonical(a, b, block) - ref) / mag)
            print(f"  k = {k}, B = {block}: {err:.3g}")


if __name__ == "__main__":
    main()

"""Backwards of resampling ops (interpolate, adaptive and 3-D average pooling) as products with
small per-axis weight matrices, for the drop-in mode.

torch computes these backwards by scattering every output gradient into the input positions it
came from, with atomics on CUDA, so they vary from run to run (and throw under
torch.use_deterministic_algorithms). Each of these ops is separable: output[o1, o2, ...] is
sum over i of M1[o1, i1] * M2[o2, i2] * ... * input[i1, i2, ...]. The input gradient is then
M1^T ... Mk^T applied to the output gradient one axis at a time, a chain of samebits GEMMs in
their canonical order: the same bits on every run (and on CPU and CUDA at `portable`).

The weights are built on the host from torch's own index formulas in the tensor's precision
(float32 arithmetic for float32, as torch's CPU and CUDA kernels compute them). A non-finite
output gradient reaches every input position of its row and column (0 * inf is NaN in a product),
where torch's scatter reaches only the positions it came from.
"""
import functools
import math

import numpy as np
import torch

from . import _ops


def _src_index(scale, dst, align_corners, cubic, f):
    """torch's area_pixel_compute_source_index, in the float type f."""
    if align_corners:
        return f(scale) * f(dst)
    src = f(scale) * (f(dst) + f(0.5)) - f(0.5)
    return src if cubic or src >= 0 else f(0)


def _scale(in_size, out_size, align_corners, scale, f):
    """torch's area_pixel_compute_scale."""
    if align_corners:
        return f(in_size - 1) / f(out_size - 1) if out_size > 1 else f(0)
    if scale is not None and scale > 0:
        return f(1.0 / scale)
    return f(in_size) / f(out_size)


def _cubic(t, f):
    a = f(-0.75)

    def near(x):   # |x| <= 1
        return ((a + f(2)) * x - (a + f(3))) * x * x + f(1)

    def far(x):    # 1 < |x| < 2
        return ((a * x - f(5) * a) * x + f(8) * a) * x - f(4) * a
    return far(t + f(1)), near(t), near(f(1) - t), far(f(2) - t)


@functools.lru_cache(maxsize=256)
def _weights(kind, out_size, in_size, align_corners, scale, double):
    """The [out_size, in_size] matrix of one axis, as float64 values computed in the dtype's
    precision (float32 or float64)."""
    f = np.float64 if double else np.float32
    m = np.zeros((out_size, in_size), dtype=np.float64)
    if kind == "nearest":
        s = f(1.0 / scale) if scale is not None and scale > 0 else f(in_size) / f(out_size)
        for o in range(out_size):
            m[o, min(int(math.floor(f(o) * s)), in_size - 1)] = 1.0
    elif kind == "linear":
        s = _scale(in_size, out_size, align_corners, scale, f)
        for o in range(out_size):
            src = _src_index(s, o, align_corners, False, f)
            i0 = int(src)
            i1 = i0 + (1 if i0 < in_size - 1 else 0)
            l1 = f(src - f(i0))
            m[o, i0] += float(f(1) - l1)
            m[o, i1] += float(l1)
    elif kind == "cubic":
        s = _scale(in_size, out_size, align_corners, scale, f)
        for o in range(out_size):
            src = _src_index(s, o, align_corners, True, f)
            i = int(math.floor(src))
            for k, w in enumerate(_cubic(f(src - f(i)), f)):
                m[o, min(max(i - 1 + k, 0), in_size - 1)] += float(w)
    elif kind == "adaptive":
        for o in range(out_size):
            start = (o * in_size) // out_size
            end = -((-(o + 1) * in_size) // out_size)
            m[o, start:end] = 1.0 / (end - start)
    return m


def _pool_weights(out_size, in_size, k, stride, pad, count_include_pad, divided):
    """avg_pool's window matrix of one axis: 1 / (the axis's share of the divisor) inside each
    window, clipped to the input, as torch's avg_pool3d computes the divisor."""
    m = np.zeros((out_size, in_size), dtype=np.float64)
    for o in range(out_size):
        start = o * stride - pad
        end = min(start + k, in_size + pad)
        size = end - start
        lo, hi = max(start, 0), min(end, in_size)
        if hi <= lo:
            continue
        m[o, lo:hi] = 1.0 if not divided else 1.0 / (size if count_include_pad else hi - lo)
    return m


def backward(grad, mats, level):
    """The input gradient: grad [B, O1..Ok] with each axis j contracted against mats[j]
    ([Oj, Ij]), giving [B, I1..Ik]. One samebits GEMM per axis. A bfloat16/float16 gradient is
    contracted in float32 (float32 weights, as torch's half kernels compute them) and rounded
    once at the end."""
    if grad.dtype in _ops.HALF:
        return backward(grad.float(), mats, level).to(grad.dtype)
    k = len(mats)
    x = grad.contiguous()
    for j in range(k):
        axis = 1 + j
        m = torch.as_tensor(mats[j], dtype=grad.dtype, device=grad.device)
        moved = x.movedim(axis, -1).contiguous()
        shape = moved.shape
        flat = _ops.mm(moved.reshape(-1, shape[-1]), m, level=level)
        x = flat.reshape(tuple(shape[:-1]) + (m.shape[1],)).movedim(-1, axis)
    return x.contiguous()

// Counting ops: bincount (counts or weighted sums per bin) and histc (PyTorch semantics).
//
// Counts are integers, accumulated exactly in 64-bit integers, so every variant gives the same
// counts on every backend in any order (all variants are `portable` for counts).
//
// Weighted bincount, `portable` (canonical result, the same on CPU and CUDA): exact fixed-point
// accumulation. With n = number of weights, M = max |w| over the finite weights and
// 2^(e-1) <= M < 2^e, every weight is scaled by 2^s, s = 62 - e - ceil(log2 n), and rounded to
// the nearest int64 q_i (ties to even); q_i are added exactly in int64 per bin (|sum| <= 2^62,
// so it cannot overflow); a bin's result is double(q_sum) (rounded to nearest) times 2^-s,
// then rounded to the output dtype. Error per bin: at most count_b * 2^-(s+1) from the scaling
// plus the final roundings, i.e. about count_b * M * 2^(ceil(log2 n) - 63): for float32 weights
// this is far below float32 resolution; for float64 weights it is coarser than a float64 sum
// when a bin is much smaller than M. Non-finite weights: a bin that receives a NaN, or both +inf
// and -inf, is NaN; else a bin that receives +inf (-inf) is +inf (-inf); finite weights of such
// bins are ignored (what any float sum gives, in any order).
// Weighted bincount, `not_guaranteed`: float atomic adds in completion order.
// bfloat16/float16 weights (every level, CPU and CUDA; out of the same dtype): the weights are
// widened exactly to float64 and the float64 result above is rounded once to the dtype. histc
// takes float32/float64 only.
//
// histc bin rule (both backends, in the input dtype T, each operation rounded once):
//   lo' = T(lo), hi' = T(hi); x is counted iff lo' <= x <= hi' (NaN is never counted);
//   b = int64(((x - lo') * T(bins)) / (hi' - lo')) truncated, then b = min(b, bins - 1).
// This is PyTorch's histc formula; a value on an inner bin edge lands where that formula puts
// it, identically on CPU and GPU. Counts are exact integers converted once to T: exact up to
// 2^24 per bin in float32 (2^53 in float64), correctly rounded beyond.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits {

// out[v] = number of i with index[i] == v (or the sum of weights[i]). index: 1-d int32/int64,
// values in [0, out.numel()) (others: IndexOutOfRange naming the first bad position, nothing
// written). weights: an empty view (data == nullptr, numel 0) for counts (out: int64), or a
// 1-d float32/float64 tensor with index's length (out: the weights' dtype). out: 1-d, any stride.
void bincount(const TensorView& index, const TensorView& weights, const TensorView& out,
              const Options& opts = {});
// out[b] = number of x in bin b of out.numel() equal bins over [lo, hi]; values outside, and NaN,
// are ignored (PyTorch histc). x: float32/float64, any shape and strides; out: 1-d, x's dtype.
// lo and hi must be finite with T(lo) < T(hi) (InvalidArgument otherwise; unlike PyTorch there
// is no lo == hi "use the data range" default: pass the range).
void histc(const TensorView& x, double lo, double hi, const TensorView& out,
           const Options& opts = {});

} // namespace samebits

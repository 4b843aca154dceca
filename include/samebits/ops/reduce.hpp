// Sums and dot products.
//
// Canonical order (the `portable` variants on every backend): a sequence x[0..n) is summed in
// chunks of 4096 elements. Within a chunk, lane l (0..255) accumulates x[l], x[l+256], ...,
// x[l+3840] in that order, starting from -0.0 (so a missing element is the same as adding -0.0).
// The 256 lane values are then combined by a fixed halving tree: for s = 128, 64, ..., 1,
// lane[l] = lane[l] + lane[l + s] for l < s. The per-chunk results form a new sequence that is
// summed the same way until one value is left. An empty sum is +0.0. dot rounds each product
// (no fused multiply-add) and sums the products in the same order. The accumulator has the input
// type (float for float32, double for float64).
//
// bfloat16 and float16 (every level, CPU and CUDA): the inputs are widened exactly to float32,
// the float32 variant of the same level computes the order above (products of two half values
// are exact in float32), and the float32 result is rounded once to the output dtype (nearest
// even, samebits/half.hpp), so portable half results are the same bits on every backend. Error:
// the float32 sum's plus half an ulp of the output dtype.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

// out (one element, any shape of numel 1) = sum of all elements of x. Float dtypes.
void sum(const TensorView& x, const TensorView& out, const Options& opts = {});
// out = sum of x along `dim`; out has x's shape without `dim`.
void sum_dim(const TensorView& x, int dim, const TensorView& out, const Options& opts = {});
// out (one element) = sum_i a[i] * b[i]; a and b have the same number of elements.
void dot(const TensorView& a, const TensorView& b, const TensorView& out, const Options& opts = {});

} // namespace samebits

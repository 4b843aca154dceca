// Counting ops.
#pragma once
#include <cstdint>

#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

// out[v] = number of i with index[i] == v (or the sum of weights[i]); index values must be
// non-negative and < out.numel(). `weights` may be an empty view (data == nullptr) for counts.
void bincount(const TensorView& index, const TensorView& weights, const TensorView& out,
              const Options& opts = {});
// out[b] = number of x in bin b of `bins` equal bins over [lo, hi]; values outside are ignored
// (PyTorch histc). out: float, [bins].
void histc(const TensorView& x, double lo, double hi, const TensorView& out,
           const Options& opts = {});

}  // namespace samebits

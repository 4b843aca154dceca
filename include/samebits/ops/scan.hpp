// Prefix sums.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

// out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...] along `dim` (inclusive).
void cumsum(const TensorView& x, int dim, const TensorView& out, const Options& opts = {});

}  // namespace samebits

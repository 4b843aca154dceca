// Gather-type ops: index_select and gather (PyTorch semantics).
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

// out[i, ...] = x[index[i], ...] along `dim`.
void index_select(const TensorView& x, int dim, const TensorView& index, const TensorView& out,
                  const Options& opts = {});
// out[p] = x[p with p[dim] = index[p]]; index and out have the same shape.
void gather(const TensorView& x, int dim, const TensorView& index, const TensorView& out,
            const Options& opts = {});

}  // namespace samebits

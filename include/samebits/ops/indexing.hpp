// Gather-type ops: index_select and gather (PyTorch semantics).
//
// Both only copy elements (no arithmetic), so one variant per backend serves every determinism
// level: the result is the same bits on any thread count, block size, device and backend.
// Tensors of up to 4 dimensions, any strides, any dtype (float32/64, bfloat16, float16 as 16-bit
// words, int32/64); index is int32
// or int64. An index outside its range throws IndexOutOfRange naming the first bad position, and
// out is left untouched.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

// out[..., i, ...] = x[..., index[i], ...] along `dim` (negative dims count from the end).
// index: 1-D [n] with values in [0, x.size(dim)); out: x's shape with size n at `dim`.
void index_select(const TensorView& x, int dim, const TensorView& index, const TensorView& out,
                  const Options& opts = {});
// out[p] = x[p with p[dim] = index[p]]; index and out have the same shape, with as many dims as
// x, and index.size(d) <= x.size(d) for every d != dim; values in [0, x.size(dim)).
void gather(const TensorView& x, int dim, const TensorView& index, const TensorView& out,
            const Options& opts = {});

} // namespace samebits

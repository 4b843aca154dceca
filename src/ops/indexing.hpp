// Arguments of index_select and gather as their variants receive them (already validated), and
// the 4-D padding both backends iterate over.
#pragma once
#include "samebits/tensor.hpp"

#include <array>
#include <cstdint>

namespace samebits::detail {

struct IndexArgs {
  TensorView x;
  int dim = 0; // normalized, in [0, x.ndim)
  TensorView index;
  TensorView out;
  bool checked = false; // index values known to be in [0, x.size(dim)) (checked on the host)
};

// Shapes and strides padded to 4 dims (leading size-1 dims), so that kernels need one loop nest.
struct Padded4 {
  std::array<std::int64_t, 4> size{1, 1, 1, 1}; // out's shape
  std::array<std::int64_t, 4> xs{0, 0, 0, 0};   // x strides
  std::array<std::int64_t, 4> is{0, 0, 0, 0};   // index strides (gather: per dim; index_select:
                                                // only is[dim] is used)
  std::array<std::int64_t, 4> os{0, 0, 0, 0};   // out strides
  int dim = 3;
};

inline Padded4 pad4(const IndexArgs& a, bool gather) {
  Padded4 p;
  const int shift = 4 - a.x.ndim;
  p.dim = a.dim + shift;
  for (int d = 0; d < a.x.ndim; ++d) {
    const auto u = static_cast<std::size_t>(d + shift), du = static_cast<std::size_t>(d);
    p.size[u] = a.out.shape[du];
    p.xs[u] = a.x.strides[du];
    p.os[u] = a.out.strides[du];
    if (gather)
      p.is[u] = a.index.strides[du];
  }
  if (!gather)
    p.is[static_cast<std::size_t>(p.dim)] = a.index.ndim == 0 ? 0 : a.index.strides[0];
  return p;
}

} // namespace samebits::detail

// Arguments of bincount and histc as their variants receive them (already validated), and the
// pieces of their canonical definitions (include/samebits/ops/histogram.hpp) that both backends
// share: histc's bin rule (the fixed-point pieces of weighted bincount are in ops/fixed_point.hpp).
#pragma once
#include "ops/fixed_point.hpp"
#include "samebits/tensor.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

namespace samebits::detail {

struct BincountArgs {
  TensorView index;   // 1-d int32/int64
  TensorView weights; // 1-d float, index's length; data == nullptr and ndim == 0: counts
  TensorView out;     // 1-d: int64 for counts, weights' dtype otherwise
  bool weighted() const { return weights.data != nullptr || weights.ndim > 0; }
};

struct HistcArgs {
  TensorView x; // float, any shape
  double lo = 0, hi = 1;
  TensorView out; // 1-d, x's dtype
};

// histc's bin of x (T: float or double), or -1 when x is not counted. lo, hi: already T.
template <class T> SAMEBITS_HD inline std::int64_t histc_bin(T x, T lo, T hi, std::int64_t bins) {
  if (!(x >= lo && x <= hi))
    return -1; // also NaN
  const T t = ((x - lo) * static_cast<T>(bins)) / (hi - lo);
  // t <= bins up to rounding; an overflowed product (inf) also lands in the last bin.
  if (!(t < static_cast<T>(bins)))
    return bins - 1;
  const auto b = static_cast<std::int64_t>(t);
  return b < bins ? b : bins - 1;
}

} // namespace samebits::detail

// Arguments of bincount and histc as their variants receive them (already validated), and the
// pieces of their canonical definitions (include/samebits/ops/histogram.hpp) that both backends
// share: the fixed-point scale of weighted bincount and histc's bin rule.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "samebits/tensor.hpp"

#if defined(__CUDACC__)
#define SAMEBITS_HD __host__ __device__
#else
#define SAMEBITS_HD
#endif

namespace samebits::detail {

struct BincountArgs {
  TensorView index;    // 1-d int32/int64
  TensorView weights;  // 1-d float, index's length; data == nullptr and ndim == 0: counts
  TensorView out;      // 1-d: int64 for counts, weights' dtype otherwise
  bool weighted() const { return weights.data != nullptr || weights.ndim > 0; }
};

struct HistcArgs {
  TensorView x;    // float, any shape
  double lo = 0, hi = 1;
  TensorView out;  // 1-d, x's dtype
};

// The fixed-point shift s of weighted bincount: weights are scaled by 2^s. n: number of
// weights (>= 1); max_abs: the largest |w| over finite weights (0 if none).
inline int bincount_fixed_shift(std::int64_t n, double max_abs) {
  if (!(max_abs > 0)) return 0;
  int e = 0;
  (void)std::frexp(max_abs, &e);  // max_abs = f * 2^e, f in [0.5, 1): max_abs < 2^e
  const int log2n = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(n - 1)));
  return 62 - e - log2n;
}

// v * 2^s, correctly rounded (the same value as ldexp, from plain multiplications by exact powers
// of two: one rounding at most). s >= -1022 always holds for n < 2^60.
SAMEBITS_HD inline double pow2(int s) {  // 2^s for -1022 <= s <= 1023
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(s + 1023) << 52);
#else
  return std::bit_cast<double>(static_cast<std::uint64_t>(s + 1023) << 52);
#endif
}
SAMEBITS_HD inline double scale_pow2(double v, int s) {
  if (s > 1023) return (v * pow2(s - 1023)) * pow2(1023);  // the first product is exact
  if (s < -1022) return (v * pow2(-1022)) * pow2(s + 1022 < -1022 ? -1022 : s + 1022);
  return v * pow2(s);
}

// histc's bin of x (T: float or double), or -1 when x is not counted. lo, hi: already T.
template <class T>
SAMEBITS_HD inline std::int64_t histc_bin(T x, T lo, T hi, std::int64_t bins) {
  if (!(x >= lo && x <= hi)) return -1;  // also NaN
  const T t = ((x - lo) * static_cast<T>(bins)) / (hi - lo);
  // t <= bins up to rounding; an overflowed product (inf) also lands in the last bin.
  if (!(t < static_cast<T>(bins))) return bins - 1;
  const auto b = static_cast<std::int64_t>(t);
  return b < bins ? b : bins - 1;
}

}  // namespace samebits::detail

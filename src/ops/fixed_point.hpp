// Exact fixed-point sums, shared by every backend: weighted bincount (portable) and the CUDA
// fixed-point scatter sum (run_to_run). n values, M = max |v| over the finite ones; each value is
// scaled by 2^s, s = fixed_point_shift(n, M), and rounded to the nearest int64 (ties to even). The
// int64 sums of at most n such values stay within 2^62, so they cannot overflow, and integer
// addition gives the same sum in every order. Non-finite values are kept aside as a mask per
// target (kPosInf | kNegInf | kNan) and decide the result alone (special_value).
#pragma once
#include "ops/host_device.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace samebits::detail {

// The shift s: values are scaled by 2^s. n: number of values (>= 1); max_abs: the largest |v|
// over finite values (0 if none).
// Host and device compute it alike (a kernel may take it from a max found on the device).
SAMEBITS_HD inline int fixed_point_shift(std::int64_t n, double max_abs) {
  if (!(max_abs > 0))
    return 0;
  int e = 0;
#if defined(__CUDA_ARCH__)
  (void)frexp(max_abs, &e); // max_abs = f * 2^e, f in [0.5, 1): max_abs < 2^e
  const int log2n = 64 - __clzll(static_cast<long long>(n - 1)); // bit width of n - 1
#else
  (void)std::frexp(max_abs, &e);
  const int log2n = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(n - 1)));
#endif
  return 62 - e - log2n;
}

// v * 2^s, correctly rounded (the same value as ldexp, from plain multiplications by exact powers
// of two: one rounding at most). s >= -1022 always holds for n < 2^60.
SAMEBITS_HD inline double pow2(int s) { // 2^s for -1022 <= s <= 1023
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(s + 1023) << 52);
#else
  return std::bit_cast<double>(static_cast<std::uint64_t>(s + 1023) << 52);
#endif
}
SAMEBITS_HD inline double scale_pow2(double v, int s) {
  if (s > 1023)
    return (v * pow2(s - 1023)) * pow2(1023); // the first product is exact
  if (s < -1022)
    return (v * pow2(-1022)) * pow2(s + 1022 < -1022 ? -1022 : s + 1022);
  return v * pow2(s);
}

// Bits of the special-value mask of a target: which non-finite values it received.
constexpr unsigned kPosInf = 1, kNegInf = 2, kNan = 4;

SAMEBITS_HD inline unsigned special_bit(double v) { // v is not finite
  return v != v ? kNan : (v > 0 ? kPosInf : kNegInf);
}

// What any float sum gives for a target with non-finite values (mask != 0): NaN for a NaN or
// for both infinities, else the infinity received; the finite values do not matter.
template <class T> SAMEBITS_HD inline T special_value(unsigned mask) {
  if ((mask & kNan) || (mask & (kPosInf | kNegInf)) == (kPosInf | kNegInf))
    return std::numeric_limits<T>::quiet_NaN();
  return (mask & kPosInf) ? std::numeric_limits<T>::infinity()
                          : -std::numeric_limits<T>::infinity();
}

} // namespace samebits::detail

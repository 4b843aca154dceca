// The element rules of the distributed fixed-point conversions (include/samebits/distributed.hpp),
// shared by the CPU loops and the CUDA kernels so that both compute the same bits.
#pragma once
#include "ops/fixed_point.hpp" // pow2, SAMEBITS_HD

#include <cstdint>

namespace samebits::detail {

// One conversion: true and q set when |x| * 2^s <= limit (limit = 2^(62 - C)), else false.
SAMEBITS_HD inline bool fixed_from_value(double x, int s, double limit, std::int64_t& q) {
  const double v = x * pow2(s); // exact while normal; a subnormal v rounds to q = 0 either way
  if (!(v <= limit && v >= -limit))
    return false; // also NaN and infinities
#if defined(__CUDA_ARCH__)
  q = __double2ll_rn(v);
#else
  q = static_cast<std::int64_t>(__builtin_nearbyint(v)); // round-to-nearest-even (default mode)
#endif
  return true;
}

// double(q) rounds to nearest (even); the power-of-two product is exact; one correctly rounded
// division; the narrowing to T rounds to nearest.
template <class T> SAMEBITS_HD inline T fixed_to_value(std::int64_t q, int s, double divisor) {
  const double v = static_cast<double>(q) * pow2(-s);
  return static_cast<T>(divisor == 1.0 ? v : v / divisor);
}

} // namespace samebits::detail

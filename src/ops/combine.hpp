// The reduction step rules of the canonical orders of scatter (include/samebits/ops/scatter.hpp)
// and segment (include/samebits/ops/segment.hpp): one copy, compiled into the CPU and the CUDA
// code alike, so that the two cannot drift apart.
//
//   sum, mean: acc + c (rounded once; explicit round-to-nearest on the device, so nothing fuses)
//   prod:      acc * c
//   amax:      (c > acc || c is NaN) ? c : acc
//   amin:      (c < acc || c is NaN) ? c : acc
//   a scaled contribution: alpha * v (index_add with alpha != 1)
//
// The NaN rule: the result of a sum, mean or prod that is NaN is written as the one quiet NaN of
// canonical_nan, whatever NaN the hardware made (x86 keeps an operand's payload or makes
// 0xFFC00000; NVIDIA GPUs make 0x7FFFFFFF). amax/amin only select elements, so they keep the NaN
// they selected, payload included.
#pragma once
#include "samebits/ops/scatter.hpp" // Reduce

#include <bit>
#include <cstdint>
#include <limits>

#if defined(__CUDACC__)
#define SAMEBITS_STEP __host__ __device__ __forceinline__
#else
#define SAMEBITS_STEP inline
#endif

namespace samebits::detail {

template <class T> SAMEBITS_STEP T add_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4)
    return __fadd_rn(a, b);
  else
    return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

template <class T> SAMEBITS_STEP T mul_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4)
    return __fmul_rn(a, b);
  else
    return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

template <class T> SAMEBITS_STEP T combine_max(T acc, T v) {
  return (v > acc || v != v) ? v : acc;
}
template <class T> SAMEBITS_STEP T combine_min(T acc, T v) {
  return (v < acc || v != v) ? v : acc;
}

SAMEBITS_STEP float canonical_nan(float v) {
#if defined(__CUDA_ARCH__)
  return v != v ? __int_as_float(0x7fc00000) : v;
#else
  return v != v ? std::bit_cast<float>(0x7fc00000u) : v;
#endif
}
SAMEBITS_STEP double canonical_nan(double v) {
#if defined(__CUDA_ARCH__)
  return v != v ? __longlong_as_double(0x7ff8000000000000LL) : v;
#else
  return v != v ? std::bit_cast<double>(std::uint64_t{0x7ff8000000000000ULL}) : v;
#endif
}

// One step of reduce R.
template <Reduce R, class T> SAMEBITS_STEP T step(T acc, T c) {
  if constexpr (R == Reduce::sum || R == Reduce::mean)
    return add_rn(acc, c);
  else if constexpr (R == Reduce::prod)
    return mul_rn(acc, c);
  else if constexpr (R == Reduce::amax)
    return combine_max(acc, c);
  else
    return combine_min(acc, c);
}

// The same with the reduce known at run time.
template <class T> SAMEBITS_STEP T step(Reduce r, T acc, T c) {
  switch (r) {
  case Reduce::prod:
    return mul_rn(acc, c);
  case Reduce::amax:
    return combine_max(acc, c);
  case Reduce::amin:
    return combine_min(acc, c);
  default:
    return add_rn(acc, c);
  }
}

// The value reduce R starts from when a target's own value does not take part.
template <Reduce R, class T> SAMEBITS_STEP constexpr T identity() {
  if constexpr (R == Reduce::prod)
    return T(1);
  else if constexpr (R == Reduce::amax)
    return -std::numeric_limits<T>::infinity();
  else if constexpr (R == Reduce::amin)
    return std::numeric_limits<T>::infinity();
  else
    return T(0);
}
template <class T> SAMEBITS_STEP T identity_of(Reduce r) {
  switch (r) {
  case Reduce::prod:
    return T(1);
  case Reduce::amax:
    return -std::numeric_limits<T>::infinity();
  case Reduce::amin:
    return std::numeric_limits<T>::infinity();
  default:
    return T(0);
  }
}

// What one source adds: alpha * v when a scale was asked for, else v itself (no multiply by 1).
template <class T> SAMEBITS_STEP T contribution(T v, T alpha, bool scaled) {
  return scaled ? mul_rn(alpha, v) : v;
}

// A target's value as it is written once its last step ran: the NaN rule above.
template <Reduce R, class T> SAMEBITS_STEP T finished(T v) {
  if constexpr (R == Reduce::amax || R == Reduce::amin)
    return v;
  else
    return canonical_nan(v);
}
template <class T> SAMEBITS_STEP T finished(Reduce r, T v) {
  return r == Reduce::amax || r == Reduce::amin ? v : canonical_nan(v);
}

} // namespace samebits::detail

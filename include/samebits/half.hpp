// bfloat16 and float16 storage types and their conversions to and from float32, shared by the
// host and the CUDA device code (nvcc compiles the same functions for both), so that the CPU and
// CUDA round the same way bit for bit.
//
// The conversions are pure integer arithmetic on the bit patterns, never the hardware's or a
// library's conversion instructions, whose NaN handling differs between vendors:
//  - to float32: exact (every bf16 and f16 value, subnormals included, is a float32 value); a NaN
//    keeps its sign and payload (shifted into float32's mantissa).
//  - from float32: round to nearest, ties to even; subnormal results are rounded like any other
//    (no flush to zero); overflow rounds to infinity; a NaN stays a NaN with its sign and the top
//    bits of its payload, the quiet bit set (so a value that came from bf16/f16 gets its own bits
//    back).
//  - from float64 (host only): correctly rounded in one step, through a float32 rounded to odd.
#pragma once
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define SAMEBITS_HALF_HD __host__ __device__
#else
#define SAMEBITS_HALF_HD
#endif

#if !defined(__CUDA_ARCH__)
#include <bit>
#include <cmath>
#include <limits>
#endif

namespace samebits {

namespace half_bits {

SAMEBITS_HALF_HD inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}
SAMEBITS_HALF_HD inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// float32 -> bfloat16 bits, round to nearest even.
SAMEBITS_HALF_HD inline std::uint16_t bf16_from_float(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign and top payload, make it quiet
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7fff plus the kept lowest bit rounds half to even; a carry into the exponent is the
  // right answer (up to infinity for values beyond the largest bf16).
  const std::uint32_t bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + bias) >> 16);
}

SAMEBITS_HALF_HD inline float float_from_bf16(std::uint16_t h) {
  return bits_float(static_cast<std::uint32_t>(h) << 16);
}

// float32 -> float16 bits, round to nearest even.
SAMEBITS_HALF_HD inline std::uint16_t f16_from_float(float f) {
  const std::uint32_t u = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN: the top 10 payload bits, quiet bit set
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
  if (a >= 0x477ff000u) // at or above 65520 (halfway from 65504 to 2^16, which rounds up): inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {  // below 2^-14: a float16 subnormal (or zero)
    if (a <= 0x33000000u) // at most 2^-25, half the smallest subnormal: ties to even give zero
      return sign;
    const std::uint32_t e = a >> 23;                     // 102 .. 112
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u; // value = m * 2^(e - 150)
    const std::uint32_t shift = 126u - e;                // 14 .. 24: in units of 2^-24
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u)))
      ++r; // may reach 0x400, the smallest normal: still the right encoding
    return static_cast<std::uint16_t>(sign | r);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits; a carry
  // runs into the exponent, which is again the right encoding.
  const std::uint32_t h = a - (112u << 23);
  std::uint32_t r = h >> 13;
  const std::uint32_t rem = h & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
    ++r;
  return static_cast<std::uint16_t>(sign | r);
}

SAMEBITS_HALF_HD inline float float_from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) // inf or NaN
    return bits_float(sign | 0x7f800000u | (m << 13));
  if (e != 0)
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0)
    return bits_float(sign);
  // Subnormal m * 2^-24: normalize the mantissa so that its leading 1 is the implicit bit.
  std::uint32_t mm = m, ee = 113u; // 2^-14 is exponent 113 in float32
  while ((mm & 0x400u) == 0) {
    mm <<= 1;
    --ee;
  }
  return bits_float(sign | (ee << 23) | ((mm & 0x3ffu) << 13));
}

#if !defined(__CUDA_ARCH__)
// float64 -> float32 rounded to odd: truncated toward zero, the lowest bit set when inexact. A
// float32 rounded to odd, then rounded to nearest even at 8 or 11 bits, is the float64 correctly
// rounded to those bits (24 >= 11 + 2).
inline float float_round_to_odd(double d) {
  if (!std::isfinite(d))
    return static_cast<float>(d);
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d)
    return f;
  if (std::isinf(f) || std::fabs(static_cast<double>(f)) > std::fabs(d))
    f = std::nextafter(f, 0.0f); // truncate toward zero (inf comes back to the largest float)
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}
#endif
#if defined(__CUDACC__)
// The same rounding to odd on the device: truncated toward zero, the lowest bit set when inexact.
__device__ inline float float_round_to_odd_device(double d) {
  float f = __double2float_rz(d);
  if (d == d && static_cast<double>(f) != d)
    f = __uint_as_float(__float_as_uint(f) | 1u);
  return f;
}
#endif

} // namespace half_bits

// A bfloat16 value held as its bits. Arithmetic goes through float32 (float(x)); conversions are
// explicit, so no rounding happens silently.
struct bf16 {
  std::uint16_t bits;
  bf16() = default;
  SAMEBITS_HALF_HD explicit bf16(float f) : bits(half_bits::bf16_from_float(f)) {}
#if !defined(__CUDA_ARCH__)
  explicit bf16(double d) : bits(half_bits::bf16_from_float(half_bits::float_round_to_odd(d))) {}
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  explicit bf16(T v) : bf16(static_cast<double>(v)) {}
#endif
  SAMEBITS_HALF_HD static bf16 from_bits(std::uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  SAMEBITS_HALF_HD explicit operator float() const {
    return half_bits::float_from_bf16(bits);
  }
  template <class T,
            std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  SAMEBITS_HALF_HD explicit operator T() const {
    return static_cast<T>(half_bits::float_from_bf16(bits));
  }
};

// An IEEE binary16 value held as its bits; as bf16.
struct f16 {
  std::uint16_t bits;
  f16() = default;
  SAMEBITS_HALF_HD explicit f16(float f) : bits(half_bits::f16_from_float(f)) {}
#if !defined(__CUDA_ARCH__)
  explicit f16(double d) : bits(half_bits::f16_from_float(half_bits::float_round_to_odd(d))) {}
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  explicit f16(T v) : f16(static_cast<double>(v)) {}
#endif
  SAMEBITS_HALF_HD static f16 from_bits(std::uint16_t b) {
    f16 h;
    h.bits = b;
    return h;
  }
  SAMEBITS_HALF_HD explicit operator float() const {
    return half_bits::float_from_f16(bits);
  }
  template <class T,
            std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  SAMEBITS_HALF_HD explicit operator T() const {
    return static_cast<T>(half_bits::float_from_f16(bits));
  }
};

// Whether T is one of the 16-bit float storage types.
template <class T> constexpr bool is_half_v = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

// Rounds a float32 to T (float: itself).
template <class T> SAMEBITS_HALF_HD inline T round_to(float f) {
  if constexpr (std::is_same_v<T, float>)
    return f;
  else
    return T(f);
}

} // namespace samebits

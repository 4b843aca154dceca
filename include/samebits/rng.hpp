// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11). The value for
// (seed, stream, offset) is a pure function, computed identically on the CPU and in CUDA kernels
// (this header compiles under nvcc too), for any number of threads or workers.
//
// Layout: key = seed (64 bits); counter = {offset low, offset high, stream low, stream high},
// where `offset` counts blocks of four 32-bit outputs. Float conversions use exact arithmetic
// only (integer to float of a 24- or 53-bit value, times a power of two), so they are portable.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>

// Host and device functions under nvcc; undefined again at the end of this header, so that it
// defines no macro for its users (src/ops/host_device.hpp has the library's SAMEBITS_HD).
#if defined(__CUDACC__)
#define SAMEBITS_RNG_HD __host__ __device__ __forceinline__
#else
#define SAMEBITS_RNG_HD inline
#endif

namespace samebits::rng {

using Block = std::array<std::uint32_t, 4>;

SAMEBITS_RNG_HD void mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                               std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

// The raw generator: 10 rounds of Philox4x32 on `counter` under `key`.
SAMEBITS_RNG_HD Block philox4x32_10(Block ctr, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr std::uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += W0;
      key[1] += W1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo32(M0, ctr[0], hi0, lo0);
    mulhilo32(M1, ctr[2], hi1, lo1);
    ctr = Block{hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

// Four 32-bit values for block `offset` of `stream` under `seed`.
SAMEBITS_RNG_HD Block block(std::uint64_t seed, std::uint64_t stream, std::uint64_t offset) {
  return philox4x32_10(
      Block{static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32),
            static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// The i-th 32-bit value of a stream (element i = word i % 4 of block i / 4).
SAMEBITS_RNG_HD std::uint32_t bits32(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return block(seed, stream, i >> 2)[i & 3];
}

// Uniform float in [0, 1) with 24 random bits: (bits >> 8) * 2^-24, exact.
SAMEBITS_RNG_HD float to_unit_float(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 5.9604644775390625e-08f;
}
// Uniform double in [0, 1) with 53 random bits from two words: exact.
SAMEBITS_RNG_HD double to_unit_double(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t v = (static_cast<std::uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(v & ((1ull << 53) - 1)) * 1.1102230246251565e-16;
}

// Element i of a stream of uniform floats in [0, 1).
SAMEBITS_RNG_HD float uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return to_unit_float(bits32(seed, stream, i));
}

// Element i of a stream of Bernoulli(p) draws: uniform < p. uniform has 24 bits, so the
// probability of 1 is p rounded up to a multiple of 2^-24: exact for such p (0.5, 0.25, ...),
// within 2^-24 of p otherwise, and 2^-24 for any 0 < p <= 2^-24. For rarer events compare
// uniform_double with p instead.
SAMEBITS_RNG_HD bool bernoulli(std::uint64_t seed, std::uint64_t stream, std::uint64_t i, float p) {
  return uniform(seed, stream, i) < p;
}

// Element i of a stream of uniform doubles in [0, 1): words 2i and 2i + 1 of the stream.
SAMEBITS_RNG_HD double uniform_double(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  const Block b = block(seed, stream, i >> 1);
  const unsigned w = static_cast<unsigned>(i & 1) * 2;
  return to_unit_double(b[w], b[w + 1]);
}

// --- portable float arithmetic -----------------------------------------------------------------
// Each helper is one correctly rounded IEEE operation. In CUDA code they are the _rn intrinsics,
// which nvcc never fuses; on the host they are plain operators, so host code that uses them must
// be compiled without FP contraction (-ffp-contract=off, as samebits itself is) or on a target
// without FMA instructions.
namespace fp {
SAMEBITS_RNG_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SAMEBITS_RNG_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
SAMEBITS_RNG_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SAMEBITS_RNG_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
SAMEBITS_RNG_HD float sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a); // correctly rounded (IEEE 754) without fast-math
#endif
}
SAMEBITS_RNG_HD std::uint32_t bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
SAMEBITS_RNG_HD float from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
} // namespace fp

// Natural logarithm of a positive normal float, from correctly rounded operations in a fixed
// order (so it gives the same bits on the CPU and in CUDA; libm's logf and CUDA's logf do not).
// Within 2 ulp of the exact value. x = m * 2^e with m in [sqrt(1/2), sqrt(2)) (exact bit
// manipulation); log(m) = 2 atanh(s), s = (m - 1) / (m + 1), by its series to s^9 (|s| < 0.172,
// truncation below 1e-9 relative); e * log(2) split into an exact high part and a low part.
SAMEBITS_RNG_HD float log_positive(float x) {
  const std::uint32_t u = fp::bits(x);
  int e = static_cast<int>((u >> 23) & 0xffu) - 127;
  std::uint32_t mb = (u & 0x007fffffu) | 0x3f800000u; // m in [1, 2)
  if (mb > 0x3fb504f3u) {                             // m > sqrt(2): halve it (exact)
    mb = (u & 0x007fffffu) | 0x3f000000u;
    e += 1;
  }
  const float f = fp::sub(fp::from_bits(mb), 1.0f); // exact (Sterbenz)
  const float s = fp::div(f, fp::add(2.0f, f));
  const float z = fp::mul(s, s);
  float p = 0.2222222222f;                   // 2/9
  p = fp::add(0.2857142857f, fp::mul(z, p)); // 2/7
  p = fp::add(0.4f, fp::mul(z, p));          // 2/5
  p = fp::add(0.6666666667f, fp::mul(z, p)); // 2/3
  const float log_m = fp::add(fp::add(s, s), fp::mul(fp::mul(s, z), p));
  const float ef = static_cast<float>(e);
  const float hi = fp::mul(ef, 0.693145751953125f);     // 0x3f317200: exact for |e| < 2^8
  const float lo = fp::mul(ef, 1.428606765330187e-06f); // log(2) - hi
  return fp::add(hi, fp::add(log_m, lo));
}

// sin and cos of 2 pi k / 2^24 for an integer k in [0, 2^24): the angle is reduced exactly in
// integers to a quarter turn n and a remainder of at most 1/8 turn, and the remainder's sine and
// cosine come from their Taylor series (to a^11 and a^12: truncation below 1e-11), evaluated by
// Horner's rule with the portable operations above.
SAMEBITS_RNG_HD void sincos_turn24(std::uint32_t k, float& sin_out, float& cos_out) {
  const std::uint32_t n = (k + (1u << 21)) >> 22; // nearest quarter turn, 0..4
  const std::int32_t r = static_cast<std::int32_t>(k) - static_cast<std::int32_t>(n << 22);
  // 2 pi / 2^24, rounded to float; |r| <= 2^21 is exact in float, so this is one rounding.
  const float a = fp::mul(static_cast<float>(r), 3.7450702829e-07f);
  const float a2 = fp::mul(a, a);
  float ps = -2.5052108e-08f;                     // -1/11!
  ps = fp::add(2.7557319e-06f, fp::mul(a2, ps));  // 1/9!
  ps = fp::add(-1.9841270e-04f, fp::mul(a2, ps)); // -1/7!
  ps = fp::add(8.3333333e-03f, fp::mul(a2, ps));  // 1/5!
  ps = fp::add(-1.6666667e-01f, fp::mul(a2, ps)); // -1/3!
  const float s = fp::add(a, fp::mul(fp::mul(a, a2), ps));
  float pc = 2.0876757e-09f;                      // 1/12!
  pc = fp::add(-2.7557319e-07f, fp::mul(a2, pc)); // -1/10!
  pc = fp::add(2.4801587e-05f, fp::mul(a2, pc));  // 1/8!
  pc = fp::add(-1.3888889e-03f, fp::mul(a2, pc)); // -1/6!
  pc = fp::add(4.1666667e-02f, fp::mul(a2, pc));  // 1/4!
  pc = fp::add(-0.5f, fp::mul(a2, pc));
  const float c = fp::add(1.0f, fp::mul(a2, pc));
  switch (n & 3u) {
  case 0:
    sin_out = s;
    cos_out = c;
    break;
  case 1:
    sin_out = c;
    cos_out = -s;
    break;
  case 2:
    sin_out = -s;
    cos_out = -c;
    break;
  default:
    sin_out = -c;
    cos_out = s;
    break;
  }
}

// Element i of a stream of standard normal floats (Box-Muller). Elements 4j..4j+3 come from
// block j: words (0, 1) give elements 4j (cos) and 4j+1 (sin), words (2, 3) elements 4j+2 and
// 4j+3. u1 = (w >> 8 + 1) / 2^24 in (0, 1], so |z| <= sqrt(2 log 2^24) = 5.77 (tails beyond
// 5.77 sigma, probability 8e-9, are not produced). Every operation is portable: same bits on the
// CPU and in CUDA.
SAMEBITS_RNG_HD float normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  const Block b = block(seed, stream, i >> 2);
  const unsigned w = static_cast<unsigned>((i >> 1) & 1) * 2;
  const float u1 = static_cast<float>((b[w] >> 8) + 1u) * 5.9604644775390625e-08f; // exact
  const float r = fp::sqrt(fp::mul(-2.0f, log_positive(u1)));
  float s, c;
  sincos_turn24(b[w + 1] >> 8, s, c);
  return fp::mul(r, (i & 1) ? s : c);
}

// --- integers without modulo bias --------------------------------------------------------------

SAMEBITS_RNG_HD std::uint64_t mulhi64(std::uint64_t a, std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// Element i of a stream of integers uniform in [0, range), range >= 1, exactly uniform (Lemire's
// multiply-and-reject). Element i uses block i of the stream: attempt 0 takes words (0, 1),
// attempt 1 words (2, 3). Further attempts (each rejected with probability below range / 2^64)
// take pairs from block i + 2^63 under the key seed + r * 0x9E3779B97F4A7C15 (r = 1, 2, ...),
// which ordinary draws (offsets below 2^63) never use and which never repeat.
SAMEBITS_RNG_HD std::uint64_t uniform_int(std::uint64_t seed, std::uint64_t stream, std::uint64_t i,
                                          std::uint64_t range) {
  const std::uint64_t threshold = (0 - range) % range; // 2^64 mod range
  for (std::uint64_t a = 0;; ++a) {
    const std::uint64_t r = a >> 1;
    const Block b =
        r == 0 ? block(seed, stream, i)
               : block(seed + r * 0x9E3779B97F4A7C15ull, stream, i | (std::uint64_t{1} << 63));
    const unsigned w = static_cast<unsigned>(a & 1) * 2;
    const std::uint64_t x = (static_cast<std::uint64_t>(b[w]) << 32) | b[w + 1];
    const std::uint64_t low = x * range;
    if (low >= threshold)
      return mulhi64(x, range);
  }
}

// A 64-bit sort key for position i of a shuffle of (seed, stream): words 0 and 1 of block i.
// A shuffle orders positions by (key, position); see samebits::randperm.
SAMEBITS_RNG_HD std::uint64_t shuffle_key(std::uint64_t seed, std::uint64_t stream,
                                          std::uint64_t i) {
  const Block b = block(seed, stream, i);
  return (static_cast<std::uint64_t>(b[0]) << 32) | b[1];
}

// A seed derived from (seed, a, b): Philox of counter (a, b) under `seed`. Gives independent
// generators for, e.g., (seed, epoch, purpose) without any limit on a or b.
SAMEBITS_RNG_HD std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  const Block r = block(seed, b, a);
  return (static_cast<std::uint64_t>(r[0]) << 32) | r[1];
}

} // namespace samebits::rng

#undef SAMEBITS_RNG_HD

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

#if defined(__CUDACC__)
#define SAMEBITS_HD __host__ __device__ __forceinline__
#else
#define SAMEBITS_HD inline
#endif

namespace samebits::rng {

using Block = std::array<std::uint32_t, 4>;

SAMEBITS_HD void mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

// The raw generator: 10 rounds of Philox4x32 on `counter` under `key`.
SAMEBITS_HD Block philox4x32_10(Block ctr, std::array<std::uint32_t, 2> key) {
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
SAMEBITS_HD Block block(std::uint64_t seed, std::uint64_t stream, std::uint64_t offset) {
  return philox4x32_10(
      Block{static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32),
            static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// The i-th 32-bit value of a stream (element i = word i % 4 of block i / 4).
SAMEBITS_HD std::uint32_t bits32(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return block(seed, stream, i >> 2)[i & 3];
}

// Uniform float in [0, 1) with 24 random bits: (bits >> 8) * 2^-24, exact.
SAMEBITS_HD float to_unit_float(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 5.9604644775390625e-08f;
}
// Uniform double in [0, 1) with 53 random bits from two words: exact.
SAMEBITS_HD double to_unit_double(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t v = (static_cast<std::uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(v & ((1ull << 53) - 1)) * 1.1102230246251565e-16;
}

// Element i of a stream of uniform floats in [0, 1).
SAMEBITS_HD float uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return to_unit_float(bits32(seed, stream, i));
}

// Element i of a stream of Bernoulli(p) draws: uniform < p.
SAMEBITS_HD bool bernoulli(std::uint64_t seed, std::uint64_t stream, std::uint64_t i, float p) {
  return uniform(seed, stream, i) < p;
}

}  // namespace samebits::rng

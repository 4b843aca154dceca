// The multipliers of the sum64 hash (samebits/trace.hpp defines them: m_i = A[i % 4096] *
// B[i / 4096]), written once for the host hash (core/trace_digest.cpp) and the CUDA digest
// (cuda/trace_digest.cu).
#pragma once
#include "ops/host_device.hpp"

#include <cstdint>

namespace samebits::trace::detail {

constexpr std::uint64_t kSumHashRow = 4096; // words per multiplier row

SAMEBITS_HD inline std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// A[k], k < kSumHashRow
SAMEBITS_HD inline std::uint64_t column_multiplier(std::uint64_t k) {
  return splitmix64(2 * k) | 1;
}
// B[j]
SAMEBITS_HD inline std::uint64_t row_multiplier(std::uint64_t j) {
  return splitmix64(2 * j + 1) | 1;
}

} // namespace samebits::trace::detail

// The canonical summation order of samebits' portable sums (documented in
// include/samebits/ops/reduce.hpp), on the host. The CUDA kernels in src/cuda/reduce.cu compute
// the same tree; tests hold the two to bitwise equality.
#pragma once
#include "cpu/thread_pool.hpp"

#include <cstdint>
#include <vector>

namespace samebits::detail {

inline constexpr int kSumLanes = 256;
inline constexpr int kSumSteps = 16;
inline constexpr std::int64_t kSumChunk = kSumLanes * kSumSteps; // 4096 elements

// Sums one chunk of `len` <= kSumChunk elements, element i being load(i).
template <class T, class Load> T canonical_chunk(std::int64_t len, Load&& load) {
  T lanes[kSumLanes];
  for (int l = 0; l < kSumLanes; ++l)
    lanes[l] = T(-0.0);
  if (len == kSumChunk) {
    for (int j = 0; j < kSumSteps; ++j)
      for (int l = 0; l < kSumLanes; ++l)
        lanes[l] += load(std::int64_t{j} * kSumLanes + l);
  } else {
    for (std::int64_t i = 0; i < len; ++i)
      lanes[i % kSumLanes] += load(i);
  }
  for (int s = kSumLanes / 2; s >= 1; s /= 2)
    for (int l = 0; l < s; ++l)
      lanes[l] += lanes[l + s];
  return lanes[0];
}

// Canonical sum of n elements load(0) .. load(n-1). Chunks of the first level run on the thread
// pool when `parallel` (each chunk's result depends on its data alone, so the thread count does
// not change the bits).
template <class T, class Load> T canonical_sum(std::int64_t n, Load&& load, bool parallel = false);

// The levels above the first: sums a vector of chunk results in place until one is left.
template <class T> T canonical_sum_partials(std::vector<T> level) {
  while (level.size() > 1) {
    const auto n = static_cast<std::int64_t>(level.size());
    const std::int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
    std::vector<T> next(static_cast<std::size_t>(chunks));
    for (std::int64_t c = 0; c < chunks; ++c) {
      const T* base = level.data() + c * kSumChunk;
      next[static_cast<std::size_t>(c)] = canonical_chunk<T>(
          std::min(kSumChunk, n - c * kSumChunk), [base](std::int64_t i) { return base[i]; });
    }
    level.swap(next);
  }
  return level[0];
}

template <class T, class Load> T canonical_sum(std::int64_t n, Load&& load, bool parallel) {
  if (n == 0)
    return T(0);
  if (n <= kSumChunk)
    return canonical_chunk<T>(n, load);
  const std::int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<T> partial(static_cast<std::size_t>(chunks));
  auto do_chunk = [&](std::int64_t c) {
    const std::int64_t base = c * kSumChunk;
    const std::int64_t len = std::min(kSumChunk, n - base);
    partial[static_cast<std::size_t>(c)] =
        canonical_chunk<T>(len, [&](std::int64_t i) { return load(base + i); });
  };
  if (parallel) {
    constexpr std::int64_t kChunksPerTask = 16;
    parallel_for((chunks + kChunksPerTask - 1) / kChunksPerTask, [&](std::int64_t t) {
      const std::int64_t end = std::min(chunks, (t + 1) * kChunksPerTask);
      for (std::int64_t c = t * kChunksPerTask; c < end; ++c)
        do_chunk(c);
    });
  } else {
    for (std::int64_t c = 0; c < chunks; ++c)
      do_chunk(c);
  }
  return canonical_sum_partials<T>(std::move(partial));
}

} // namespace samebits::detail

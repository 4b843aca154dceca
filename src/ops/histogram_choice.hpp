// The launch choice of the CUDA bincount and histc (cuda/histogram.cu), as pure functions of the
// shape, the device's SM count and the family's tuning, callable on the host without a GPU.
// Counts and fixed-point sums are exact integers, so no choice changes a portable bit.
#pragma once
#include "core/tuning.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace samebits::detail {

struct HistogramTuning {
  bool alternative = false; // 64-thread blocks on a grid of at most 13 blocks
};

constexpr std::size_t kHistogramSmemBytes = 48 * 1024; // shared-memory bins at most

// A grid-stride launch over n elements.
struct HistogramLaunch {
  unsigned grid = 1;
  int block = 256;
};
// Enough blocks to fill a device of `sms` SMs, at most 2^31 elements per block (shared 32-bit
// counters cannot overflow).
HistogramLaunch histogram_launch(std::int64_t n, int sms,
                                 const HistogramTuning& t = tuning<HistogramTuning>());

struct BincountChoice {
  HistogramLaunch accumulate, finalize;
  bool fixed_point = false;   // exact int64 sums of weights (the portable variant, weighted)
  bool shared_bins = false;   // per-block shared-memory bins, then global atomics
  std::size_t smem_bytes = 0; // dynamic shared memory of the accumulation
  std::string name() const;
};
// `weight_bytes`: 4 or 8 (0: no weights, counts).
BincountChoice choose_bincount_kernel(std::int64_t n, std::int64_t bins, int weight_bytes,
                                      bool canonical, int sms,
                                      const HistogramTuning& t = tuning<HistogramTuning>());

struct HistcChoice {
  HistogramLaunch count, finalize;
  bool shared_bins = false; // replicated shared-memory counters
  int replicas = 1;
  std::size_t smem_bytes = 0;
  std::string name() const;
};
HistcChoice choose_histc_kernel(std::int64_t n, std::int64_t bins, int sms,
                                const HistogramTuning& t = tuning<HistogramTuning>());

} // namespace samebits::detail

// The kernel choice of the CUDA cumsum (cuda/scan.cu: cuda.lookback_unordered and
// cuda.canonical_lookback), as a pure function of the shape and the family's tuning, callable on
// the host without a GPU. The canonical order is per tile, so no choice changes the portable bits.
#pragma once
#include "core/tuning.hpp"

#include <cstdint>
#include <string>

namespace samebits::detail {

struct ScanTuning {
  // One-tile units on a small persistent grid for the look-back, 64-thread blocks on a capped
  // grid for the other kernels.
  bool alternative = false;
};

// A cumsum as lines [outer, len, inner] around its dim.
struct ScanShape {
  std::int64_t outer = 1, len = 1, inner = 1;
  int elem_bytes = 4;    // 4: float32, 8: float64
  bool canonical = true; // cuda.canonical_lookback (else cuda.lookback_unordered)
};

enum class ScanKernel {
  none,         // nothing to scan
  thread_lines, // scan_short_lines_kernel: a thread per line (at most 16 elements)
  warp_lines,   // scan_warp_lines_kernel: a warp per line (at most 256 elements)
  lookback,     // scan_lines_kernel: a block per unit of `unit_tiles` tiles, look-back between
  three_pass,   // group_totals, group_prefix, group_scan: lines along a non-last dim
};

struct ScanChoice {
  ScanKernel kernel = ScanKernel::none;
  int block = 256;
  std::int64_t grid_cap = std::int64_t{1} << 30; // most blocks of each launch
  unsigned grid = 1;                             // blocks (thread_lines, warp_lines, lookback)
  int unit_tiles = 1;                            // lookback: tiles per unit (K)
  int unit_slots = 1; // lookback: tiles a unit can hold (the kernel's template argument)
  std::int64_t units = 0, units_per_line = 0, tiles_per_line = 0; // lookback
  std::string name() const;
};

ScanChoice choose_scan_kernel(const ScanShape& s, const ScanTuning& t = tuning<ScanTuning>());

} // namespace samebits::detail

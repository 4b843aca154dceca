// Launch arithmetic shared by the kernel-choice functions of every op family (ops/*_choice.hpp)
// and the CUDA launchers: grid sizing, lanes per group, the "one wave" constant and the rows a
// pull keeps in flight. Plain C++ with no CUDA dependency, so that a host test can check every
// kernel choice without a GPU.
#pragma once
#include <algorithm>
#include <cstdint>

namespace samebits::detail {

constexpr std::int64_t kMaxGridX = 2147483647; // gridDim.x limit
constexpr std::int64_t kMaxGridYZ = 65535;     // gridDim.y and gridDim.z limit

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Blocks for `work_blocks` blocks' worth of work, at most `cap` (and the hardware limit), at
// least 1. Kernels launched with fewer blocks than work loop (grid-stride) over the rest.
inline unsigned grid_size(std::int64_t work_blocks, std::int64_t cap = kMaxGridX) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(std::min(work_blocks, cap), 1, kMaxGridX));
}

// Blocks of `block` threads for `threads` threads (one thread per item), at most `cap`.
inline unsigned grid_for(std::int64_t threads, int block, std::int64_t cap = kMaxGridX) {
  return grid_size(ceil_div(threads, block), cap);
}

// About the threads an H200 holds at once (132 SMs x 2048): kernels that pick a path by "few" or
// "many" threads compare against this constant, never against the device they run on, so a shape
// takes the same path on every GPU.
constexpr std::int64_t kOneWave = std::int64_t{1} << 18;

// Lanes per group: the smallest power of two >= n, at most `most` (a power of two).
inline int pow2_lanes(std::int64_t n, int most) {
  int g = 1;
  while (g < most && g < n)
    g *= 2;
  return g;
}

// Source rows whose loads a lane group issues before its steps, on the many-targets pulls of the
// scatter and segment families. Fewer rows hold fewer registers, so more groups are resident
// (H200, scatter plan reused, share of the copy ceiling with 16 / 8 / 4 rows: E=8M -> N=1M F=64
// 57/78/87%, E=2M -> N=100k F=64 63/83/86%, E=1M -> N=2708 F=128 68/85/81%; segment sums of one
// column, E=10M -> 1M rows: 22% with 16, 26% with 4): 4 for short chains, 8 from 64 sources per
// target on average. `forced` (4, 8 or 16, from the family's tuning) overrides it; the bits are
// the same.
inline int pull_batch(std::int64_t sources, std::int64_t targets, int forced = 0) {
  if (forced == 4 || forced == 8 || forced == 16)
    return forced;
  return sources >= 64 * targets ? 8 : 4;
}

} // namespace samebits::detail

// The CUDA cumsum's kernel choice (see scan_choice.hpp), with the measurements that set it.
#include "ops/scan_choice.hpp"

#include "ops/launch_shape.hpp"
#include "ops/scan.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace samebits::detail {

namespace {

constexpr int kShortLine = 2 * kScanSegment; // longer lines, up to a group, take a warp each
// Units of 4 float tiles hold half the registers (64 instead of 118-122: more blocks per SM). The
// unordered look-back adds unit totals, so more units cost it little (H200, 2^28 floats: 1.09 ->
// 1.03 ms; [4096, 4096] along dim 1: 0.087 -> 0.056); the canonical one re-adds tile totals
// (2^28: 1.22 -> 1.34 ms), so it takes them only for lines of at most 4 tiles, which are one unit
// either way and have no look-back within the line.
bool small_units(int elem_bytes, bool canonical, std::int64_t tiles_per_line) {
  return elem_bytes == 4 && (!canonical || tiles_per_line <= kScanSmallUnitTiles);
}

} // namespace

ScanChoice choose_scan_kernel(const ScanShape& s, const ScanTuning& t) {
  ScanChoice c;
  const bool alt = t.alternative;
  if (s.outer * s.len * s.inner == 0)
    return c;
  if (s.inner == 1 && s.len <= kScanGroupElems) {
    c.block = alt ? 64 : 256;
    const bool thread_per_line = s.len <= kShortLine; // else a warp per line
    c.kernel = thread_per_line ? ScanKernel::thread_lines : ScanKernel::warp_lines;
    const std::int64_t per_block = thread_per_line ? c.block : c.block / 32;
    c.grid_cap = alt ? 45 : std::int64_t{1} << 30;
    c.grid =
        static_cast<unsigned>(std::min<std::int64_t>(ceil_div(s.outer, per_block), c.grid_cap));
    return c;
  }
  if (s.inner == 1) {
    c.kernel = ScanKernel::lookback;
    c.block = kScanTile / kScanSegment;
    c.tiles_per_line = ceil_div(s.len, kScanTile);
    const bool small = !alt && small_units(s.elem_bytes, s.canonical, c.tiles_per_line);
    c.unit_slots = small ? kScanSmallUnitTiles : scan_unit_tiles(s.elem_bytes);
    c.unit_tiles = alt ? 1 : c.unit_slots;
    c.units_per_line = ceil_div(c.tiles_per_line, c.unit_tiles);
    c.units = s.outer * c.units_per_line;
    c.grid_cap = alt ? 37 : std::int64_t{1} << 30;
    c.grid = static_cast<unsigned>(std::min<std::int64_t>(c.units, c.grid_cap));
    return c;
  }
  c.kernel = ScanKernel::three_pass;
  c.block = alt ? 64 : 256;
  c.grid_cap = alt ? 45 : std::int64_t{1} << 30;
  c.grid = grid_for(s.outer * ceil_div(s.len, kScanGroupElems) * s.inner, c.block, c.grid_cap);
  return c;
}

std::string ScanChoice::name() const {
  switch (kernel) {
  case ScanKernel::none:
    return "no launch (nothing to scan)";
  case ScanKernel::thread_lines:
    return fmt::format("scan_short_lines_kernel (a thread per line), block {}, grid {}", block,
                       grid);
  case ScanKernel::warp_lines:
    return fmt::format("scan_warp_lines_kernel (a warp per line), block {}, grid {}", block, grid);
  case ScanKernel::lookback:
    return fmt::format("scan_lines_kernel<unit of {} tiles> ({} tiles per unit, {} units), block "
                       "{}, grid {}",
                       unit_slots, unit_tiles, units, block, grid);
  case ScanKernel::three_pass:
    return fmt::format("group_totals_kernel, group_prefix_kernel, group_scan_kernel, block {}, "
                       "grid {} (at most {})",
                       block, grid, grid_cap);
  }
  return "?";
}

} // namespace samebits::detail

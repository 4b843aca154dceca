// The CUDA segment family's kernel choice (see segment_choice.hpp), with the measurements that
// set each threshold.
#include "ops/segment_choice.hpp"

#include "ops/launch_shape.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace samebits::detail {

namespace {

constexpr int kDefaultBlock = 256;
constexpr int kMaxGrid = 1 << 30;
constexpr int kStageBlock = kSegmentStageWarps * 32;

// The staged kernel pays off when few rows leave the GPU waiting on its longest row (Cora: 2708
// rows, one with 168 positions); with many rows the pull kernel's groups of lanes fill the GPU
// and keep more loads in flight per thread (one-column segment sums over 1M rows: 4.6x slower
// staged, measured on the H200).
bool prefer_staged(std::int64_t segs, std::int64_t cols) {
  return cols <= 32 && segs * pow2_lanes(cols, 32) < kOneWave;
}

} // namespace

SegmentChoice choose_segment_kernel(const SegmentShape& s, const SegmentTuning& t) {
  SegmentChoice c;
  const int block = t.block_threads > 0 ? t.block_threads : kDefaultBlock;
  c.block = block;
  if (s.segs <= 0 || s.cols <= 0)
    return c;
  if (s.atomic) {
    c.kernel = SegmentKernel::atomic_push;
    c.group = pow2_lanes(s.cols, 32);
    c.grid = grid_for(ceil_div(s.positions, kSegmentPushChunk) * c.group, block, kMaxGrid);
    return c;
  }
  if (t.allow_staged && prefer_staged(s.segs, s.cols)) {
    c.kernel = SegmentKernel::staged;
    c.block = std::min(block, kStageBlock);
    c.group = 32;
    c.grid = grid_for(s.segs * 32, c.block, kMaxGrid);
    return c;
  }
  const int VM = 16 / s.elem_bytes;
  const bool vec =
      t.allow_vector && s.cols % VM == 0 && s.ldx % VM == 0 && s.ldo % VM == 0 && s.aligned;
  c.vec = vec ? VM : 1;
  c.group = pow2_lanes(ceil_div(s.cols, c.vec), 32);
  // Loading ahead pays on few long rows (H200, 2M positions into 1000 rows of 64: 0.40 ms with
  // batches of row numbers and values in turn, 0.17 with row numbers one batch ahead, 0.146 with
  // values one batch and row numbers two ahead) and costs occupancy on many rows (1M-row graph,
  // row numbers one batch ahead: 2.37 -> 2.63 ms).
  if (t.allow_prefetch && s.segs * c.group < kOneWave) {
    c.kernel = SegmentKernel::pull_ahead;
    c.block = std::min(block, kSegmentAheadBlock);
    c.batch = kSegmentAheadBatch;
  } else {
    c.kernel = SegmentKernel::pull;
    c.batch = pull_batch(s.positions, s.segs, t.batch);
  }
  // A tile per group-wide chunk of columns, side by side, rather than each group walking its
  // row's positions once per chunk in turn (the long rows set the time; see the scatter pull's
  // tiles in scatter_choice.cpp). The bits do not depend on the tiles.
  c.tiles = static_cast<unsigned>(
      std::min<std::int64_t>(ceil_div(s.cols, std::int64_t{c.group} * c.vec), kMaxGridYZ));
  c.grid = grid_for(s.segs * c.group, c.block, kMaxGrid);
  return c;
}

std::string SegmentChoice::name() const {
  const std::string launch =
      tiles > 1 ? fmt::format("block {}, grid {} x {} column tiles", block, grid, tiles)
                : fmt::format("block {}, grid {}", block, grid);
  switch (kernel) {
  case SegmentKernel::none:
    return "no launch (no rows or no columns)";
  case SegmentKernel::staged:
    return "staged_kernel (a warp per row, positions staged in shared memory), " + launch;
  case SegmentKernel::pull:
    return fmt::format("pull_kernel<V={}, B={}> ({} lanes per row), {}", vec, batch, group, launch);
  case SegmentKernel::pull_ahead:
    return fmt::format("pull_ahead_kernel<V={}, B={}> ({} lanes per row), {}", vec, batch, group,
                       launch);
  case SegmentKernel::atomic_push:
    return fmt::format("fill_kernel, push_kernel ({} lanes per 16-edge chunk), finish_kernel, {}",
                       group, launch);
  }
  return "?";
}

} // namespace samebits::detail

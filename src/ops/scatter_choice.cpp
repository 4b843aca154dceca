// The CUDA scatter family's kernel choice (see scatter_choice.hpp), with the measurements that
// set each threshold.
#include "ops/scatter_choice.hpp"

#include "ops/launch_shape.hpp"

#include <algorithm>
#include <climits>
#include <fmt/format.h>
#include <limits>

namespace samebits::detail {

namespace {

// Up to this many sources per target on average, 32 targets per warp in the one-value pull;
// beyond, a warp per target.
constexpr std::int64_t kSpanShortChain = 64;
// The lane pull's targets have at least this many sources on average (E=2M -> 1000 targets: 2000,
// the lane pull 0.55 -> 0.16 ms; E=1M -> 2708: 369, the lane pull 20-45% slower).
constexpr std::int64_t kLaneMinChain = 1000;

} // namespace

int scatter_block(const ScatterTuning& t) {
  return t.alternative ? 128 : 256;
}

ScatterPullChoice choose_scatter_pull(const ScatterPullShape& s, const ScatterTuning& t) {
  ScatterPullChoice c;
  c.block = scatter_block(t);
  const std::int64_t M = s.targets, F = s.features;
  if (M == 0 || F == 0)
    return c;
  const bool alt = t.alternative;
  if (F == 1) {
    // Rows of one value. Short chains (H200, E=10M -> 1M targets): 32 targets per warp when the
    // values are gathered through the order (plan reused 0.152 -> 0.128-0.136 ms); a thread per
    // target when the sort carried the values (contiguous: 2-3% faster than a span). Long chains:
    // a warp per target. The alternative configuration swaps 32 and 1 targets per warp and never
    // takes the thread kernel.
    const bool short_chains = s.sources <= kSpanShortChain * M;
    if (short_chains && s.direct && !alt) {
      c.kernel = ScatterPullKernel::thread;
      c.grid = grid_for(M, c.block);
    } else {
      c.kernel = ScatterPullKernel::span;
      c.rows = short_chains != alt ? 32 : 1;
      c.grid = grid_for(ceil_div(M, c.rows) * 32, c.block);
    }
    return c;
  }
  // Many targets: groups of up to 32 lanes per target with 16-byte loads where the rows allow
  // them. Few targets (a quarter of the threads the GPU holds; their chains are long): a lane per
  // feature, groups of up to a block, row numbers and values loaded ahead (H200, E=2M -> 1000
  // targets of 64 features: 0.55 -> 0.16 ms; the same choice for 2708 or 100k targets costs
  // 20-45%). Sources past 2^31 - 1 rows (int row numbers) take the general lane groups.
  // The alternative configuration swaps the two; the bits are the same either way.
  const int VM = 16 / s.elem_bytes;
  const bool can_vec = F % VM == 0 && s.src_row % VM == 0 && s.out_row % VM == 0 && s.aligned;
  const int vec_group = pow2_lanes(ceil_div(F, VM), 32);
  // Few targets with long chains only: GATConv on Cora (13264 edges into 2708 targets of 64
  // features, chains of 5 on average) took the lane pull's 22 us a call (run 135), where the
  // group pull's 16-byte loads serve short chains. Not yet timed.
  const bool few = (M * vec_group < kOneWave / 4 && s.sources >= kLaneMinChain * M) != alt;
  if (few && s.sources <= INT_MAX) {
    c.kernel = ScatterPullKernel::lane;
    c.group = pow2_lanes(F, c.block);
    c.batch = s.elem_bytes == 4 ? 16 : 8;
  } else if (can_vec) {
    c.kernel = ScatterPullKernel::group;
    c.group = vec_group;
    c.vec = VM;
    c.batch = pull_batch(s.sources, M, t.pull_batch);
  } else {
    c.kernel = ScatterPullKernel::group;
    c.group = pow2_lanes(F, 32);
    c.batch = 16;
  }
  // The group pull: one tile per group-wide chunk of features, so a lane folds one chain per tile
  // instead of walking its target's chain once per chunk (H200, SAGEConv on Cora, 10556 sources of
  // 1433 features into 2708 targets, in-degree up to 168: 625 -> 106 us). The bits do not depend
  // on the tiles. The lane pull keeps its own loop: its few targets have no wide rows to tile
  // (E=2M -> 1000 targets of 64 features, plan reused: 0.200 ms with one tile in run 134, 0.202
  // without tiles in run 137).
  if (c.kernel == ScatterPullKernel::group)
    c.tiles = static_cast<unsigned>(
        std::min<std::int64_t>(ceil_div(F, std::int64_t{c.group} * c.vec), kMaxGridYZ));
  // Less than one wave of threads and short chains on average: residency is no limit, the longest
  // chain is (GATConv on Cora, 13264 sources into 2708 targets with a hub of 169: 42 round trips
  // at 4 rows in flight; its pull 30 -> 26 us a call with 16, run 136). Long average chains keep
  // their 8 (E=1M -> 2708 targets of 128 features, plan reused: 0.145 ms with 8, 0.219 with 16).
  if (c.kernel == ScatterPullKernel::group && t.pull_batch == 0 && c.batch == 4 &&
      M * c.group * c.tiles < kOneWave)
    c.batch = 16;
  c.grid = grid_for(M * c.group, c.block);
  return c;
}

std::string ScatterPullChoice::name() const {
  const std::string launch =
      tiles > 1 ? fmt::format("block {}, grid {} x {} feature tiles", block, grid, tiles)
                : fmt::format("block {}, grid {}", block, grid);
  switch (kernel) {
  case ScatterPullKernel::none:
    return "no launch (nothing to pull)";
  case ScatterPullKernel::thread:
    return "pull_thread_kernel (a thread per target), " + launch;
  case ScatterPullKernel::span:
    return fmt::format("pull_span_kernel ({} target{} per warp), {}", rows, rows == 1 ? "" : "s",
                       launch);
  case ScatterPullKernel::lane:
    return fmt::format("pull_lane_kernel<B={}> ({} lanes per target), {}", batch, group, launch);
  case ScatterPullKernel::group:
    return fmt::format("pull_group_kernel<V={}, B={}> ({} lanes per target), {}", vec, batch, group,
                       launch);
  }
  return "?";
}

bool fixed_point_one_block(std::int64_t contributions, std::int64_t targets,
                           const ScatterTuning& t) {
  // The host's launches set a small call's time (a Cora count scatter, 10556 values into 2708
  // nodes: two memsets and three kernels where one launch does).
  return !t.alternative && contributions <= kFixedOneBlockMaxContributions &&
         targets <= kFixedOneBlockMaxTargets;
}

int fixed_point_blocks(std::int64_t contributions, int compute_major, const ScatterTuning& t) {
  if (compute_major < 9)
    return 1;
  if (t.fixed_blocks == 1 || t.fixed_blocks == kFixedClusterBlocks)
    return t.fixed_blocks;
  // One block on one SM: 25 us a call for the 13264 degree counts of GCNConv on Cora (H200, its
  // 1024 threads issuing the check's and the sums' instructions; a GCN training makes 22 calls).
  return contributions > 2 * kFixedOneBlockThreads ? kFixedClusterBlocks : 1;
}

bool fixed_point_yields_to_short_sort(std::int64_t rows, std::int64_t row_targets,
                                      std::int64_t features, const ScatterTuning& t) {
  // GATConv on Cora (13264 edges into 2708 nodes, 4 heads): 5 of its 16 scatters a step took the
  // three kernels and two memsets, 5 calls into the CUDA runtime against 2, in a training bound
  // by the host's launches.
  if (t.alternative || features <= 1 || rows <= 0 ||
      fixed_point_one_block(rows * features, row_targets * features, t))
    return false;
  const IndexSort s = choose_index_sort(rows, row_targets, t);
  return s == IndexSort::block_count || s == IndexSort::block || s == IndexSort::block16;
}

IndexSort choose_index_sort(std::int64_t n, std::int64_t num_keys, const ScatterTuning& t,
                            bool carried) {
  if (t.alternative || num_keys <= 0 || n >= std::numeric_limits<int>::max())
    return IndexSort::radix;
  // Short indices into few targets: a counting sort in one block, two passes of match_any over
  // the positions (the one-block radix sort took 42 us of device time for GATConv on Cora, 13264
  // edges into 2708 targets, against 5 us for torch's atomics: run 135). Not yet timed.
  if (n > 0 && n <= kBlockCountMaxPositions && num_keys <= kBlockCountMaxKeys)
    return IndexSort::block_count;
  // Short indices: one launch instead of four to seven (H200, SAGEConv on Cora, 10556 edges into
  // 2708 targets: the sorts were 5-7 of the 9-10 launches of each scatter call, and the training
  // is bound by the host's launches).
  if (n <= kBlockSortMaxPositions && num_keys <= kBlockSortMaxKeys)
    return IndexSort::block;
  // A little longer (GATConv on Cora with self-loops: 13264 edges into 2708 targets).
  if (!carried && n <= kBlockSort16MaxPositions && num_keys <= kBlockSort16MaxKeys)
    return IndexSort::block16;
  if (n > 0 && num_keys <= kCountSortMaxKeys)
    return IndexSort::counting;
  return IndexSort::radix;
}

std::string index_sort_name(IndexSort s) {
  switch (s) {
  case IndexSort::block_count:
    return fmt::format("one-block counting sort (at most {} positions and {} targets)",
                       kBlockCountMaxPositions, kBlockCountMaxKeys);
  case IndexSort::block:
    return fmt::format("one-block radix sort (at most {} positions and {} targets)",
                       kBlockSortMaxPositions, kBlockSortMaxKeys);
  case IndexSort::block16:
    return fmt::format("one-block radix sort of 16-bit keys (at most {} positions and {} targets)",
                       kBlockSort16MaxPositions, kBlockSort16MaxKeys);
  case IndexSort::counting:
    return fmt::format("counting sort (at most {} targets)", kCountSortMaxKeys);
  case IndexSort::radix:
    break;
  }
  return "CUB radix sort";
}

} // namespace samebits::detail

// The CUDA kernel-choice functions of every op family (src/ops/*_choice.hpp), on the host with no
// GPU: the kernel each shape takes under the default tuning, what each tuning field forces, and
// that TuningGuard restores the tuning it replaced. The CUDA variants launch exactly what these
// functions return, so a forced tuning that these tests see taking effect takes effect on the GPU.
#include "ops/histogram_choice.hpp"
#include "ops/indexing_choice.hpp"
#include "ops/reduce_choice.hpp"
#include "ops/scan_choice.hpp"
#include "ops/scatter_choice.hpp"
#include "ops/segment_choice.hpp"

#include <gtest/gtest.h>

namespace samebits::detail {
namespace {

SegmentShape segment_shape(std::int64_t segs, std::int64_t cols, std::int64_t positions,
                           int elem_bytes = 4) {
  SegmentShape s;
  s.segs = segs;
  s.cols = cols;
  s.positions = positions;
  s.ldx = s.ldo = cols;
  s.elem_bytes = elem_bytes;
  return s;
}

// The defect this replaces: SegmentLaunch::batch was dropped by its setter, so the tests that
// forced 4, 8 or 16 positions in flight ran the shape's own batch. Each batch must reach the
// kernel choice, for float32 and float64, few rows and many.
TEST(KernelChoice, SegmentTuningForcesEveryBatch) {
  for (int elem : {4, 8})
    for (std::int64_t segs : {std::int64_t{100}, std::int64_t{1} << 20})
      for (int batch : {4, 8, 16}) {
        const SegmentTuning t{.allow_staged = false, .allow_prefetch = false, .batch = batch};
        const SegmentChoice c = choose_segment_kernel(segment_shape(segs, 64, 10 * segs, elem), t);
        EXPECT_EQ(c.kernel, SegmentKernel::pull) << c.name();
        EXPECT_EQ(c.batch, batch) << c.name();
      }
}

TEST(KernelChoice, SegmentDefaultsFollowTheShape) {
  // Cora-like: few rows of at most 32 columns take the staged warp per row.
  EXPECT_EQ(choose_segment_kernel(segment_shape(2708, 7, 13264)).kernel, SegmentKernel::staged);
  // Few rows of 64 columns: the pull that loads ahead, 16 positions a batch, 16-byte loads.
  const SegmentChoice few = choose_segment_kernel(segment_shape(1000, 64, 2000000));
  EXPECT_EQ(few.kernel, SegmentKernel::pull_ahead);
  EXPECT_EQ(few.batch, 16);
  EXPECT_EQ(few.vec, 4);
  EXPECT_EQ(few.group, 16);
  EXPECT_EQ(few.tiles, 1u);
  // Wide rows: 32 lanes x 4 columns a tile (1024 columns: 8 tiles), one value per load for an odd
  // width (1433 columns: 45 tiles of 32).
  EXPECT_EQ(choose_segment_kernel(segment_shape(2708, 1024, 10556)).tiles, 8u);
  EXPECT_EQ(choose_segment_kernel(segment_shape(2708, 1433, 10556)).tiles, 45u);
  // Many rows: the pull, 4 positions in flight below 64 positions per row, 8 from there.
  const SegmentChoice many = choose_segment_kernel(segment_shape(1 << 20, 64, 10 << 20));
  EXPECT_EQ(many.kernel, SegmentKernel::pull);
  EXPECT_EQ(many.batch, 4);
  EXPECT_EQ(choose_segment_kernel(segment_shape(1 << 20, 64, 64 << 20)).batch, 8);
  // Rows not 16-byte aligned: one value per load.
  SegmentShape odd = segment_shape(1 << 20, 64, 10 << 20);
  odd.ldx = 65;
  EXPECT_EQ(choose_segment_kernel(odd).vec, 1);
  // The atomic variant, and nothing to do.
  SegmentShape atomic = segment_shape(1000, 64, 5000);
  atomic.atomic = true;
  EXPECT_EQ(choose_segment_kernel(atomic).kernel, SegmentKernel::atomic_push);
  EXPECT_EQ(choose_segment_kernel(segment_shape(0, 64, 0)).kernel, SegmentKernel::none);
}

TEST(KernelChoice, SegmentTuningFieldsEachTakeEffect) {
  const SegmentShape cora = segment_shape(2708, 7, 13264);
  EXPECT_EQ(choose_segment_kernel(cora, {.allow_staged = false}).kernel, SegmentKernel::pull_ahead);
  EXPECT_EQ(choose_segment_kernel(cora, {.allow_staged = false, .allow_prefetch = false}).kernel,
            SegmentKernel::pull);
  const SegmentShape wide = segment_shape(1 << 20, 64, 10 << 20);
  EXPECT_EQ(choose_segment_kernel(wide, {.allow_vector = false}).vec, 1);
  EXPECT_EQ(choose_segment_kernel(wide, {.block_threads = 128}).block, 128);
  // The kernels that hold many registers cap the block.
  EXPECT_EQ(choose_segment_kernel(cora, {.block_threads = 1024}).block, 256);
}

TEST(KernelChoice, TuningGuardSetsAndRestores) {
  EXPECT_EQ(tuning<SegmentTuning>().batch, 0);
  {
    const TuningGuard<SegmentTuning> g(
        {.allow_staged = false, .allow_prefetch = false, .batch = 16});
    EXPECT_EQ(tuning<SegmentTuning>().batch, 16);
    // The default argument of the choice is the tuning in force.
    EXPECT_EQ(choose_segment_kernel(segment_shape(100, 64, 1000)).batch, 16);
    {
      const TuningGuard<SegmentTuning> inner({.batch = 8});
      EXPECT_EQ(tuning<SegmentTuning>().batch, 8);
    }
    EXPECT_EQ(tuning<SegmentTuning>().batch, 16);
  }
  EXPECT_EQ(tuning<SegmentTuning>().batch, 0);
  EXPECT_TRUE(tuning<SegmentTuning>().allow_staged);
}

ScatterPullShape pull_shape(std::int64_t targets, std::int64_t features, std::int64_t sources,
                            int elem_bytes = 4) {
  ScatterPullShape s;
  s.targets = targets;
  s.features = features;
  s.sources = sources;
  s.src_row = s.out_row = features;
  s.elem_bytes = elem_bytes;
  return s;
}

TEST(KernelChoice, ScatterPullOneValueRows) {
  ScatterPullShape s = pull_shape(1 << 20, 1, 10 << 20);
  s.direct = true; // the sort carried float32 values
  EXPECT_EQ(choose_scatter_pull(s).kernel, ScatterPullKernel::thread);
  const ScatterPullChoice alt = choose_scatter_pull(s, {.alternative = true});
  EXPECT_EQ(alt.kernel, ScatterPullKernel::span); // the alternative never takes the thread kernel
  EXPECT_EQ(alt.rows, 1);
  EXPECT_EQ(alt.block, 128);
  s.direct = false;
  EXPECT_EQ(choose_scatter_pull(s).rows, 32); // short chains: 32 targets per warp
  EXPECT_EQ(choose_scatter_pull(pull_shape(1000, 1, 1000000)).rows, 1); // long chains
}

TEST(KernelChoice, ScatterPullRowsOfFeatures) {
  // Few targets: a lane per feature with values and row numbers loaded ahead.
  const ScatterPullChoice few = choose_scatter_pull(pull_shape(1000, 64, 2000000));
  EXPECT_EQ(few.kernel, ScatterPullKernel::lane);
  EXPECT_EQ(few.group, 64);
  EXPECT_EQ(few.batch, 16);
  EXPECT_EQ(choose_scatter_pull(pull_shape(1000, 64, 2000000, 8)).batch, 8);
  // Many targets: groups with 16-byte loads, 4 rows in flight, 8 from 64 sources per target.
  const ScatterPullChoice many = choose_scatter_pull(pull_shape(1 << 20, 64, 8 << 20));
  EXPECT_EQ(many.kernel, ScatterPullKernel::group);
  EXPECT_EQ(many.vec, 4);
  EXPECT_EQ(many.group, 16);
  EXPECT_EQ(many.batch, 4);
  EXPECT_EQ(choose_scatter_pull(pull_shape(1 << 20, 64, 64 << 20)).batch, 8);
  for (int batch : {4, 8, 16})
    EXPECT_EQ(choose_scatter_pull(pull_shape(1 << 20, 64, 8 << 20), {.pull_batch = batch}).batch,
              batch);
  // Few targets with short chains (GATConv on Cora: 13264 edges into 2708 targets of 64 features):
  // the group pull.
  const ScatterPullChoice gat = choose_scatter_pull(pull_shape(2708, 64, 13264));
  EXPECT_EQ(gat.kernel, ScatterPullKernel::group);
  EXPECT_EQ(gat.batch, 16); // less than one wave of threads: the longest chain sets the time
  EXPECT_EQ(choose_scatter_pull(pull_shape(2708, 64, 13264), {.pull_batch = 4}).batch, 4);
  EXPECT_EQ(choose_scatter_pull(pull_shape(2708, 128, 1000000)).batch, 8); // long chains keep 8
  EXPECT_EQ(choose_scatter_pull(pull_shape(2708, 64, 13264), {.alternative = true}).kernel,
            ScatterPullKernel::lane);
  // The alternative swaps few and many.
  EXPECT_EQ(choose_scatter_pull(pull_shape(1000, 64, 2000000), {.alternative = true}).kernel,
            ScatterPullKernel::group);
  EXPECT_EQ(choose_scatter_pull(pull_shape(1 << 20, 64, 8 << 20), {.alternative = true}).kernel,
            ScatterPullKernel::lane);
  // Unaligned rows: one value per load, 16 rows.
  ScatterPullShape odd = pull_shape(1 << 20, 64, 8 << 20);
  odd.aligned = false;
  const ScatterPullChoice scalar = choose_scatter_pull(odd);
  EXPECT_EQ(scalar.vec, 1);
  EXPECT_EQ(scalar.batch, 16);
  EXPECT_EQ(scalar.group, 32);
  EXPECT_EQ(choose_scatter_pull(pull_shape(0, 64, 0)).kernel, ScatterPullKernel::none);
  EXPECT_EQ(many.tiles, 1u); // the group covers the row
}

TEST(KernelChoice, ScatterPullTilesWideRows) {
  // SAGEConv's first aggregation on Cora: 1433 features (odd: one value per load) into 2708
  // targets. A tile per 32 features, so no lane walks a long chain 45 times in a row.
  const ScatterPullChoice cora = choose_scatter_pull(pull_shape(2708, 1433, 10556));
  EXPECT_EQ(cora.kernel, ScatterPullKernel::group);
  EXPECT_EQ(cora.group, 32);
  EXPECT_EQ(cora.vec, 1);
  EXPECT_EQ(cora.tiles, 45u);
  EXPECT_NE(cora.name().find("45 feature tiles"), std::string::npos) << cora.name();
  // 16-byte loads: 32 lanes x 4 values a tile.
  EXPECT_EQ(choose_scatter_pull(pull_shape(1 << 20, 1024, 8 << 20)).tiles, 8u);
  // The lane pull loops over the features itself.
  const ScatterPullChoice few = choose_scatter_pull(pull_shape(100, 1000, 200000));
  EXPECT_EQ(few.kernel, ScatterPullKernel::lane);
  EXPECT_EQ(few.group, 256);
  EXPECT_EQ(few.tiles, 1u);
  // At most gridDim.y's limit: the kernels loop over the rest.
  EXPECT_EQ(choose_scatter_pull(pull_shape(1 << 20, std::int64_t{1} << 24, 1 << 20)).tiles, 65535u);
}

TEST(KernelChoice, FixedPointInOneBlockForSmallCalls) {
  EXPECT_TRUE(fixed_point_one_block(10556, 2708)); // a Cora count scatter
  EXPECT_TRUE(fixed_point_one_block(kFixedOneBlockMaxContributions, kFixedOneBlockMaxTargets));
  EXPECT_FALSE(fixed_point_one_block(kFixedOneBlockMaxContributions + 1, 16));
  EXPECT_FALSE(fixed_point_one_block(100, kFixedOneBlockMaxTargets + 1));
  EXPECT_FALSE(fixed_point_one_block(100, 16, {.alternative = true}));
}

TEST(KernelChoice, FixedPointClusterOnGpusThatHaveClusters) {
  EXPECT_EQ(fixed_point_blocks(13264, 9), kFixedClusterBlocks); // a GCNConv degree count on Cora
  EXPECT_EQ(fixed_point_blocks(13264, 8), 1);                   // no clusters before sm_90
  EXPECT_EQ(fixed_point_blocks(2 * kFixedOneBlockThreads, 9), 1);
  EXPECT_EQ(fixed_point_blocks(2 * kFixedOneBlockThreads + 1, 10), kFixedClusterBlocks);
  EXPECT_EQ(fixed_point_blocks(13264, 9, {.fixed_blocks = 1}), 1);
  EXPECT_EQ(fixed_point_blocks(100, 9, {.fixed_blocks = kFixedClusterBlocks}), kFixedClusterBlocks);
  EXPECT_EQ(fixed_point_blocks(100, 8, {.fixed_blocks = kFixedClusterBlocks}), 1);
  EXPECT_EQ(fixed_point_blocks(13264, 9, {.fixed_blocks = 3}), kFixedClusterBlocks); // not a size
}

// Past one block, a short index of rows of 2-4 floats takes the kept one-block sort (two
// launches) instead of the fixed point's three kernels and two memsets.
TEST(KernelChoice, FixedPointYieldsToTheKeptSortForShortIndices) {
  EXPECT_TRUE(fixed_point_yields_to_short_sort(13264, 2708, 4)); // GATConv on Cora, 4 heads
  EXPECT_TRUE(fixed_point_yields_to_short_sort(100, 20000, 4));  // too many targets for a block
  EXPECT_TRUE(fixed_point_yields_to_short_sort(kBlockSort16MaxPositions, 60000, 2));
  EXPECT_FALSE(fixed_point_yields_to_short_sort(13264, 2708, 1)); // one value: carried, not kept
  EXPECT_FALSE(fixed_point_yields_to_short_sort(4096, 1024, 4));  // one block: one launch
  EXPECT_FALSE(fixed_point_yields_to_short_sort(kBlockSort16MaxPositions + 1, 2708, 4)); // long
  EXPECT_FALSE(fixed_point_yields_to_short_sort(13264, 70000, 4)); // targets past the 16-bit sort
  EXPECT_FALSE(fixed_point_yields_to_short_sort(13264, 2708, 4, {.alternative = true}));
  EXPECT_FALSE(fixed_point_yields_to_short_sort(0, 2708, 4));
}

TEST(KernelChoice, IndexSortFollowsTheShape) {
  EXPECT_EQ(choose_index_sort(100000, kCountSortMaxKeys), IndexSort::counting);
  EXPECT_EQ(choose_index_sort(100000, kCountSortMaxKeys + 1), IndexSort::radix);
  EXPECT_EQ(choose_index_sort(100000, 100, {.alternative = true}), IndexSort::radix);
  // Short indices into few targets: the one-block counting sort, carried values or not, up to
  // both its limits (Cora's 10556 edges into 2708 targets; GATConv's 13264 with self-loops).
  for (const bool carried : {false, true}) {
    EXPECT_EQ(choose_index_sort(10556, 2708, {}, carried), IndexSort::block_count);
    EXPECT_EQ(choose_index_sort(13264, 2708, {}, carried), IndexSort::block_count);
    EXPECT_EQ(choose_index_sort(1, 1, {}, carried), IndexSort::block_count);
    EXPECT_EQ(choose_index_sort(kBlockCountMaxPositions, kBlockCountMaxKeys, {}, carried),
              IndexSort::block_count);
    EXPECT_EQ(choose_index_sort(kBlockCountMaxPositions + 1, 100, {}, carried),
              IndexSort::counting);
  }
  // More targets: the one-block radix sorts, up to their limits.
  EXPECT_EQ(choose_index_sort(0, 100), IndexSort::block);
  EXPECT_EQ(choose_index_sort(10556, kBlockCountMaxKeys + 1), IndexSort::block);
  EXPECT_EQ(choose_index_sort(kBlockSortMaxPositions, kBlockSortMaxKeys), IndexSort::block);
  EXPECT_EQ(choose_index_sort(kBlockSortMaxPositions + 1, kBlockCountMaxKeys + 1),
            IndexSort::block16);
  EXPECT_EQ(choose_index_sort(kBlockSortMaxPositions + 1, kBlockCountMaxKeys + 1, {},
                              /*carried=*/true),
            IndexSort::radix);
  EXPECT_EQ(choose_index_sort(kBlockSort16MaxPositions, kBlockSort16MaxKeys), IndexSort::block16);
  EXPECT_EQ(choose_index_sort(12000, kBlockSort16MaxKeys + 1), IndexSort::radix);
  EXPECT_EQ(choose_index_sort(1000, kBlockSortMaxKeys + 1), IndexSort::radix);
  EXPECT_EQ(choose_index_sort(1000, 100, {.alternative = true}), IndexSort::radix);
  EXPECT_EQ(choose_index_sort(1000, 0), IndexSort::radix); // every index out of range
  EXPECT_NE(index_sort_name(IndexSort::block_count).find("2944 targets"), std::string::npos);
  EXPECT_NE(index_sort_name(IndexSort::block).find("11264 positions"), std::string::npos);
}

ScanShape scan_shape(std::int64_t outer, std::int64_t len, std::int64_t inner, int elem_bytes = 4,
                     bool canonical = true) {
  return {outer, len, inner, elem_bytes, canonical};
}

TEST(KernelChoice, ScanKernels) {
  EXPECT_EQ(choose_scan_kernel(scan_shape(1000, 16, 1)).kernel, ScanKernel::thread_lines);
  EXPECT_EQ(choose_scan_kernel(scan_shape(1000, 17, 1)).kernel, ScanKernel::warp_lines);
  EXPECT_EQ(choose_scan_kernel(scan_shape(1000, 256, 1)).kernel, ScanKernel::warp_lines);
  const ScanChoice line = choose_scan_kernel(scan_shape(1, 1 << 24, 1));
  EXPECT_EQ(line.kernel, ScanKernel::lookback);
  EXPECT_EQ(line.unit_tiles, 8);
  EXPECT_EQ(line.tiles_per_line, (1 << 24) / 2048);
  EXPECT_EQ(choose_scan_kernel(scan_shape(1, 1 << 24, 1, 8)).unit_tiles, 4);
  // Lines of at most 4 tiles, and the unordered look-back, take units of 4 float tiles.
  EXPECT_EQ(choose_scan_kernel(scan_shape(4096, 4096, 1)).unit_slots, 4);
  EXPECT_EQ(choose_scan_kernel(scan_shape(1, 1 << 24, 1, 4, false)).unit_slots, 4);
  const ScanChoice alt = choose_scan_kernel(scan_shape(1, 1 << 24, 1), {.alternative = true});
  EXPECT_EQ(alt.unit_tiles, 1);
  EXPECT_EQ(alt.grid, 37u);
  const ScanChoice along = choose_scan_kernel(scan_shape(64, 1000, 64));
  EXPECT_EQ(along.kernel, ScanKernel::three_pass);
  EXPECT_EQ(choose_scan_kernel(scan_shape(64, 1000, 64), {.alternative = true}).block, 64);
}

TEST(KernelChoice, HistogramLaunches) {
  const HistogramLaunch big = histogram_launch(std::int64_t{1} << 28, 132);
  EXPECT_EQ(big.block, 256);
  EXPECT_EQ(big.grid, 132u * 8);
  const HistogramLaunch alt = histogram_launch(std::int64_t{1} << 28, 132, {.alternative = true});
  EXPECT_EQ(alt.block, 64);
  EXPECT_EQ(alt.grid, 13u);
  // At most 2^31 elements per block.
  EXPECT_GE(histogram_launch(std::int64_t{1} << 36, 1, {.alternative = true}).grid, 32u);
  EXPECT_TRUE(choose_bincount_kernel(1000, 1000, 4, true, 132).shared_bins);
  EXPECT_FALSE(choose_bincount_kernel(1000, 100000, 4, true, 132).shared_bins);
  EXPECT_TRUE(choose_bincount_kernel(1000, 100, 4, true, 132).fixed_point);
  EXPECT_FALSE(choose_bincount_kernel(1000, 100, 0, true, 132).fixed_point);
  EXPECT_EQ(choose_histc_kernel(1 << 20, 100, 132).replicas, 8);
}

TEST(KernelChoice, ReduceLaunches) {
  const ReduceLaunch rows = choose_reduce_launch(ReduceKernel::rows, 1, 4096, false);
  EXPECT_EQ(rows.block, 128);
  EXPECT_EQ(rows.work, 1024);
  EXPECT_EQ(choose_reduce_launch(ReduceKernel::rows, 1, 4096, true).cap, 0); // persistent grid
  const ReduceLaunch tuned = choose_reduce_launch(ReduceKernel::rows, 1, 4096, true, {64, 5});
  EXPECT_EQ(tuned.block, 64);
  EXPECT_EQ(tuned.cap, 5);
  EXPECT_EQ(choose_reduce_launch(ReduceKernel::columns, 1000, 2, false).block, 32);
  EXPECT_EQ(choose_reduce_launch(ReduceKernel::columns, 1000, 2, false, {64, 0}).block, 4);
}

TEST(KernelChoice, IndexingKernels) {
  IndexingShape s;
  s.rows = 1000;
  s.row_bytes = 64 * 4;
  s.elements = 1000 * 64;
  const IndexingChoice rows = choose_indexing_kernel(s);
  EXPECT_EQ(rows.kernel, IndexingKernel::copy_rows);
  EXPECT_EQ(rows.word_bytes, 16);
  EXPECT_EQ(rows.bx, 16);
  EXPECT_EQ(rows.by, 16);
  s.aligned = false;
  EXPECT_EQ(choose_indexing_kernel(s).word_bytes, 4);
  s.gather = true;
  EXPECT_EQ(choose_indexing_kernel(s).kernel, IndexingKernel::copy_any);
  s.elements = 0;
  EXPECT_EQ(choose_indexing_kernel(s).kernel, IndexingKernel::none);
}

// A call whose index is still to be checked takes the one-block check and copy up to both limits,
// gather or index_select, any layout; past either limit, or with a checked index, the copies.
TEST(KernelChoice, IndexingOneBlockUpToItsLimits) {
  for (const bool gather : {false, true})
    for (const bool contiguous : {false, true})
      for (const std::int64_t indices :
           {std::int64_t{1}, kOneBlockCopyMaxIndices, kOneBlockCopyMaxIndices + 1})
        for (const std::int64_t elements :
             {std::int64_t{1}, kOneBlockCopyMaxElements, kOneBlockCopyMaxElements + 1})
          for (const bool check : {false, true}) {
            IndexingShape s;
            s.gather = gather;
            s.contiguous = contiguous;
            s.rows = indices;
            s.row_bytes = 4;
            s.elements = elements;
            s.indices = indices;
            s.check = check;
            const bool small =
                indices <= kOneBlockCopyMaxIndices && elements <= kOneBlockCopyMaxElements;
            const IndexingChoice c = choose_indexing_kernel(s);
            EXPECT_EQ(c.kernel == IndexingKernel::one_block, check && small)
                << gather << contiguous << indices << " " << elements << check;
            if (c.kernel == IndexingKernel::one_block) {
              EXPECT_EQ(c.grid, 1u);
              EXPECT_EQ(c.bx, kOneBlockCopyThreads);
            }
          }
}

} // namespace
} // namespace samebits::detail

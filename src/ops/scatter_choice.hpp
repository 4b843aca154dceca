// The kernel choice of the CUDA scatter family (index_add, index_add with a plan, scatter_add,
// scatter_reduce) and of the GPU index sort, as pure functions of the shape and the family's
// tuning: the CUDA variants launch what they return, `samebits ops --explain` prints it, and host
// tests check it without a GPU. Plain C++: no CUDA dependency.
#pragma once
#include "core/tuning.hpp"

#include <cstdint>
#include <string>

namespace samebits::detail {

// Launch tuning of the scatter family. The default is what runs; every value gives the same bits
// at run_to_run and portable (the GPU tests run each one).
struct ScatterTuning {
  // The alternative launch configuration: 128-thread blocks instead of 256, the many/few-targets
  // choice of the pull swapped, 1 and 32 targets per warp swapped in the one-value pull (which
  // never takes the thread-per-target kernel), and always the radix sort.
  bool alternative = false;
  // Source rows in flight per lane group of the vector pull: 4, 8 or 16; 0: from the shape.
  int pull_batch = 0;
  // Blocks of the one-launch fixed-point scatter: 1 (one block), kFixedClusterBlocks (a thread
  // block cluster, where the GPU has them); 0: from the shape and the GPU.
  int fixed_blocks = 0;
};

// Threads per block of the scatter kernels (checks, atomics, sorts' helpers, pulls).
int scatter_block(const ScatterTuning& t = tuning<ScatterTuning>());

// The pull over sorted sources (cuda.sort_pull, cuda.plan_pull) for rows of `features`
// contiguous values: what it is given.
struct ScatterPullShape {
  std::int64_t targets = 0;              // M: rows of out
  std::int64_t features = 1;             // F: values per row
  std::int64_t sources = 0;              // L: rows of src
  std::int64_t src_row = 0, out_row = 0; // row strides (elements)
  int elem_bytes = 4;                    // 4: float32, 8: float64
  bool direct = false; // one value per row, carried in sorted order by the sort (float32 F=1)
  bool aligned = true; // src and out data 16-byte aligned
};

enum class ScatterPullKernel {
  none,   // nothing to pull (no targets or no features)
  thread, // pull_thread_kernel: a thread per target over the carried values
  span,   // pull_span_kernel: a warp per `rows` targets staging sources in shared memory
  lane,   // pull_lane_kernel: a lane per (target, feature), values and row numbers loaded ahead
  group,  // pull_group_kernel: a group of lanes per target, `vec`-wide loads, `batch` rows
};

struct ScatterPullChoice {
  ScatterPullKernel kernel = ScatterPullKernel::none;
  int block = 256;   // threads per block
  unsigned grid = 1; // blocks
  int group = 1;     // lanes per target (lane, group)
  int rows = 1;      // targets per warp (span)
  int vec = 1;       // values per load (group)
  int batch = 0;     // source rows whose loads are issued before their steps (lane, group)
  // Feature tiles (group): gridDim.y, each tile `group * vec` features of every target, so that
  // no lane walks a long chain of sources once per feature chunk.
  unsigned tiles = 1;
  std::string name() const; // e.g. "pull_group_kernel<V=4, B=8> group 16, block 256, grid 4096"
};

ScatterPullChoice choose_scatter_pull(const ScatterPullShape& s,
                                      const ScatterTuning& t = tuning<ScatterTuning>());

// The fixed-point scatter (cuda.fixed_point) of a small call in one block (check, integer sums and
// finish in one launch, the sums in shared memory); three kernels otherwise. The same bits either
// way (the same shift and exact integers); the alternative configuration always takes the three.
constexpr int kFixedOneBlockThreads = 1024;
constexpr std::int64_t kFixedOneBlockMaxTargets = 4096; // int64 sums and byte masks: 36 KiB
constexpr std::int64_t kFixedOneBlockMaxContributions = std::int64_t{1} << 14;
bool fixed_point_one_block(std::int64_t contributions, std::int64_t targets,
                           const ScatterTuning& t = tuning<ScatterTuning>());
// The blocks that one launch spreads over: a cluster of kFixedClusterBlocks on GPUs of compute
// capability 9 or later once there are more contributions than one block takes in two steps of
// its threads, else 1. Each block checks and sums its share of the contributions in its own
// shared memory and finishes a share of the targets from every block's sums (distributed shared
// memory): the same integers, so the same bits as one block.
constexpr int kFixedClusterBlocks = 8; // the largest cluster every such GPU launches
int fixed_point_blocks(std::int64_t contributions, int compute_major,
                       const ScatterTuning& t = tuning<ScatterTuning>());

// Whether the fixed-point scatter of float32 rows (`rows` index positions into `row_targets` rows,
// `features` values each) steps aside for the sort and pull: when it would take its three kernels
// and two memsets (not one block) and the index is short enough for a one-block sort that is kept
// for the next calls (automatic reuse of short indices): then a call is one launch of a sort that
// usually finds its result kept, and one pull. Not for rows of one value (the sort carries those
// and keeps nothing) nor the alternative configuration.
bool fixed_point_yields_to_short_sort(std::int64_t rows, std::int64_t row_targets,
                                      std::int64_t features,
                                      const ScatterTuning& t = tuning<ScatterTuning>());

// The GPU's stable sort of (index, position) pairs: one block's radix sort for short indices
// (one launch), a counting sort for few targets, CUB's radix sort otherwise. A stable sort has one
// result, so the choice never changes a bit.
enum class IndexSort {
  block_count, // block_count_kernel: a counting sort in one block (short indices, few targets)
  block,       // block_sort_kernel: check, sort and offsets in one block (short indices)
  block16,     // the same with 16-bit keys and positions (a little longer; no carried values)
  counting,    // tile counts, a scan and stable placement (few targets)
  radix,       // key building, CUB's device radix sort and the offsets kernel
};
constexpr std::int64_t kBlockSortMaxPositions = 1024 * 11; // one block of 1024 threads x 11 keys
constexpr std::int64_t kBlockSortMaxKeys = std::int64_t{1} << 17; // its offsets: binary searches
constexpr std::int64_t kBlockSort16MaxPositions = 1024 * 16;      // 16-bit: 1024 threads x 16 keys
constexpr std::int64_t kBlockSort16MaxKeys = 65535;               // with the sentinel, 16 bits
constexpr std::int64_t kCountSortMaxKeys = 1536; // targets the counting sort takes at most
// The one-block counting sort: 8 warps' 16-bit counts of every target in shared memory (8 x 2944
// x 2 bytes, under 48 KiB with the block's other storage); positions and starts fit 16 bits.
constexpr std::int64_t kBlockCountMaxPositions = 16384;
constexpr std::int64_t kBlockCountMaxKeys = 2944;
// carried: the sort carries 32-bit values (float32 rows of one value) instead of positions.
IndexSort choose_index_sort(std::int64_t n, std::int64_t num_keys,
                            const ScatterTuning& t = tuning<ScatterTuning>(), bool carried = false);
std::string index_sort_name(IndexSort s); // for --explain

} // namespace samebits::detail

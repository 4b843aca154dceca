// The kernel choice of the CUDA segment_reduce and aggregate (cuda/segment.cu), as a pure
// function of the shape and the family's tuning: the variants launch what it returns,
// `samebits ops --explain` prints it, and host tests check it without a GPU. Plain C++.
#pragma once
#include "core/tuning.hpp"

#include <cstdint>
#include <string>

namespace samebits::detail {

// Launch tuning of the segment family. Every value gives the same bits (the GPU tests run each).
struct SegmentTuning {
  int block_threads = 0;      // threads per block; 0: 256
  bool allow_vector = true;   // 16-byte loads where the rows are aligned
  bool allow_staged = true;   // few rows of at most 32 columns: a warp per row staging positions
  bool allow_prefetch = true; // few rows: values one batch, row numbers two batches ahead
  int batch = 0; // positions a lane loads before folding them (4, 8 or 16); 0: from the shape
};

// Launch limits the kernels are compiled for (cuda/segment.cu uses these same constants).
constexpr int kSegmentAheadBlock = 256;        // pull_ahead_kernel: the largest block
constexpr int kSegmentAheadBatch = 16;         // pull_ahead_kernel: positions per batch
constexpr int kSegmentStageWarps = 8;          // staged_kernel: warps per block at most
constexpr std::int64_t kSegmentPushChunk = 16; // push_kernel: edges per lane group

struct SegmentShape {
  std::int64_t segs = 0;         // output rows (S)
  std::int64_t cols = 1;         // values per row
  std::int64_t positions = 0;    // CSR positions (E for aggregate, rows of x for segment_reduce)
  std::int64_t ldx = 0, ldo = 0; // row strides of x and out (elements)
  int elem_bytes = 4;            // 4: float32, 8: float64
  bool aligned = true;           // x and out data 16-byte aligned
  bool atomic = false;           // the not_guaranteed variant (cuda.atomic_push)
};

enum class SegmentKernel {
  none,        // nothing to compute (no rows or no columns)
  staged,      // staged_kernel: a warp per row, positions staged through shared memory
  pull,        // pull_kernel<V, B>: a group of lanes per row, B positions loaded before folding
  pull_ahead,  // pull_ahead_kernel<V, 16>: values one batch, row numbers two batches ahead
  atomic_push, // fill_kernel, push_kernel, finish_kernel: atomics in schedule order
};

struct SegmentChoice {
  SegmentKernel kernel = SegmentKernel::none;
  int block = 256;    // threads per block
  unsigned grid = 1;  // blocks (of the main kernel)
  int group = 1;      // lanes per row
  int vec = 1;        // values per load
  int batch = 0;      // positions loaded before their steps (pull, pull_ahead)
  unsigned tiles = 1; // column tiles of group * vec columns (pull, pull_ahead): gridDim.y
  std::string name() const;
};

SegmentChoice choose_segment_kernel(const SegmentShape& s,
                                    const SegmentTuning& t = tuning<SegmentTuning>());

} // namespace samebits::detail

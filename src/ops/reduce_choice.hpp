// The launch choice of the CUDA sum, sum_dim and dot (cuda/reduce.cu), as a pure function of the
// shape and the family's tuning, callable on the host without a GPU. The tree's shape is fixed
// by the canonical order alone; the launch only decides which warp computes which chunk.
#pragma once
#include "core/tuning.hpp"

#include <cstdint>
#include <string>

namespace samebits::detail {

// Launch tuning of the reduce family (tests and benchmarks run several: same bits).
struct ReduceTuning {
  int block = 0;         // threads per block (rows: 32..256; columns: 16 per output); 0: default
  std::int64_t grid = 0; // at most this many blocks (kernels loop over the rest); 0: default
};

enum class ReduceKernel {
  rows,    // rows_kernel: a warp per 4096-element chunk (every level above the first too)
  columns, // columns_kernel: 32 neighbouring outputs per block, 16 threads per output
};

constexpr int kReduceColumnThreads = 16; // columns_kernel: threads per output (blockDim.y)
constexpr int kReduceMaxColumns = 32;    // columns_kernel: outputs per block at most

struct ReduceLaunch {
  ReduceKernel kernel = ReduceKernel::rows;
  int block = 128;       // rows: threads per block; columns: outputs per block (blockDim.x)
  std::int64_t work = 1; // blocks' worth of work
  std::int64_t cap = 0;  // most blocks; 0: the blocks resident on the device (persistent grid)
  std::string name() const;
};

// Level-1 launch of M outputs of C chunks each. `atomic`: the not_guaranteed variant, whose rows
// kernel runs on a persistent grid so that each warp adds its chunks locally.
ReduceLaunch choose_reduce_launch(ReduceKernel kernel, std::int64_t M, std::int64_t C, bool atomic,
                                  const ReduceTuning& t = tuning<ReduceTuning>());

} // namespace samebits::detail

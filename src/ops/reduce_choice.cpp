// The CUDA reduce family's launch choice (see reduce_choice.hpp).
#include "ops/reduce_choice.hpp"

#include "ops/launch_shape.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace samebits::detail {

ReduceLaunch choose_reduce_launch(ReduceKernel kernel, std::int64_t M, std::int64_t C, bool atomic,
                                  const ReduceTuning& t) {
  ReduceLaunch l;
  l.kernel = kernel;
  if (kernel == ReduceKernel::rows) {
    // 32..256 threads (the kernel's register budget allows 256); default 4 warps per block.
    l.block = t.block > 0 ? std::clamp(t.block / 32 * 32, 32, 256) : 128;
    l.work = ceil_div(M * C, l.block / 32);
    // Portable: one chunk per warp, the hardware balances blocks. Atomic: a persistent grid.
    l.cap = t.grid > 0 ? t.grid : atomic ? 0 : kMaxGridX;
  } else {
    l.block = t.block > 0 ? std::clamp(t.block / kReduceColumnThreads, 1, kReduceMaxColumns)
                          : kReduceMaxColumns;
    l.work = ceil_div(M, l.block) * C;
    l.cap = t.grid > 0 ? t.grid : kMaxGridX;
  }
  return l;
}

std::string ReduceLaunch::name() const {
  const std::string grid = cap == 0
                               ? fmt::format("grid min({}, blocks resident on the device)", work)
                               : fmt::format("grid {}", grid_size(work, cap));
  if (kernel == ReduceKernel::rows)
    return fmt::format("rows_kernel (a warp per chunk), block {}, {}", block, grid);
  return fmt::format("columns_kernel ({} outputs x {} threads per block), {}", block,
                     kReduceColumnThreads, grid);
}

} // namespace samebits::detail

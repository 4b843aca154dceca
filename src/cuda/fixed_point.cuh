// Device side of the exact fixed-point sums (ops/fixed_point.hpp) shared by weighted bincount and
// the scatter sum: the one pass before accumulating finds the first bad index, max |c| over the
// finite values, and whether any value is non-finite; publish_check combines them per block.
#pragma once
#include <climits>
#include <cuda_runtime.h>

namespace samebits::detail {

struct CheckResult {
  unsigned long long first_bad; // smallest position of a bad index (ULLONG_MAX: none)
  unsigned long long
      max_bits;     // bits of max |c| over finite values (non-negative doubles order as integers)
  unsigned special; // any non-finite value
  unsigned pad;
};

// Combines every thread's findings over its warp, then its block, and publishes them with one set
// of atomics per block (min, max and or: the result does not depend on the order). Every thread
// of the block must call it.
__device__ __forceinline__ void publish_check(unsigned long long bad, double mx, unsigned sp,
                                              CheckResult* res) {
  __shared__ unsigned long long w_bad[32];
  __shared__ double w_max[32];
  __shared__ unsigned w_sp[32];
  for (int pass = 0; pass < 2; ++pass) {
    for (int o = 16; o > 0; o >>= 1) {
      bad = min(bad, __shfl_xor_sync(0xffffffffu, bad, o));
      mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      sp |= __shfl_xor_sync(0xffffffffu, sp, o);
    }
    if (pass == 1)
      break;
    const int warp = static_cast<int>(threadIdx.x >> 5),
              warps = static_cast<int>((blockDim.x + 31) >> 5);
    if ((threadIdx.x & 31) == 0) {
      w_bad[warp] = bad;
      w_max[warp] = mx;
      w_sp[warp] = sp;
    }
    __syncthreads();
    if (warp != 0)
      return;
    const int lane = static_cast<int>(threadIdx.x & 31);
    bad = lane < warps ? w_bad[lane] : ULLONG_MAX;
    mx = lane < warps ? w_max[lane] : 0.0;
    sp = lane < warps ? w_sp[lane] : 0u;
  }
  if (threadIdx.x == 0) {
    if (bad != ULLONG_MAX)
      atomicMin(&res->first_bad, bad);
    if (mx > 0)
      atomicMax(&res->max_bits, static_cast<unsigned long long>(__double_as_longlong(mx)));
    if (sp)
      atomicOr(&res->special, 1u);
  }
}

} // namespace samebits::detail

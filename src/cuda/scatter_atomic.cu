// The cuda.atomic variant of index_add, scatter_add and scatter_reduce (not_guaranteed): indices
// checked, then every contribution combined into its target with atomicAdd (atomicCAS loops for
// prod, amax, amin) in whatever order the hardware schedules; mean divides by counts at the end.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "cuda/index_plan.cuh"
#include "cuda/launch.cuh"
#include "cuda/scatter_shared.cuh"
#include "ops/scatter.hpp"
#include "ops/scatter_choice.hpp"

#include <math_constants.h>

namespace samebits::detail {

namespace {

__device__ __forceinline__ unsigned to_bits(float v) {
  return __float_as_uint(v);
}
__device__ __forceinline__ unsigned long long to_bits(double v) {
  return static_cast<unsigned long long>(__double_as_longlong(v));
}
__device__ __forceinline__ float from_bits(unsigned b, float) {
  return __uint_as_float(b);
}
__device__ __forceinline__ double from_bits(unsigned long long b, double) {
  return __longlong_as_double(static_cast<long long>(b));
}

template <class T> __device__ void atomic_step(int r, T* addr, T c) {
  if (r == kSum || r == kMean) {
    atomicAdd(addr, c);
    return;
  }
  using U = decltype(to_bits(T()));
  U* a = reinterpret_cast<U*>(addr);
  U old = *a, assumed;
  do {
    assumed = old;
    old = atomicCAS(a, assumed, to_bits(step(r, from_bits(assumed, T()), c)));
  } while (assumed != old);
}

// --- validation -------------------------------------------------------------------------------

__global__ void check_kernel(Geo4 g, const void* idx, bool is64, unsigned long long* bad) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       e < g.numel; e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t m = load_index(idx, is64, offset_of(e, g.size, g.idx_st, g.nd));
    if (m < 0 || m >= g.M)
      atomicMin(bad, static_cast<unsigned long long>(e));
  }
}

// Checks every index value (of `check`'s positions) before anything is written: the kernels after
// it read *bad and write nothing when it is set. Waits and throws, or in deferred mode queues the
// report (`vec`: one index value per row, whose value the message can name).
void check_indices(const ScatterArgs& a, const Geo4& check, bool vec, cudaStream_t stream,
                   unsigned long long* bad) {
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
  const int block = scatter_block();
  const unsigned grid = std::min<unsigned>(grid_for(check.numel, block), 132u * 32u);
  const bool is64 = a.index.dtype == DType::i64;
  if (check.numel > 0) {
    check_kernel<<<grid, block, 0, stream>>>(check, a.index.data, is64, bad);
    SAMEBITS_CUDA_CHECK_LAUNCH("check_kernel");
  }
  if (defer_index_checks()) {
    const DeferredIndex at =
        vec ? DeferredIndex{a.index.data, is64, a.index.stride(0)} : DeferredIndex{};
    defer_index_error(bad, 1, at, DeferredIndex{}, deferred_scatter_message(a.op, check.M, vec),
                      stream);
    return;
  }
  if (const std::int64_t e = first_bad_position(bad, stream); e >= 0)
    throw_bad_index(a, e, check);
}

// True when the check found a bad index: the kernel writes nothing.
__device__ __forceinline__ bool gated(const unsigned long long* bad) {
  return *bad != ~0ull;
}

// --- atomic (not_guaranteed) ------------------------------------------------------------------

// mode 0: write the identity into every target that receives a contribution (include_self =
// false); mode 1: combine the contributions atomically (and count them for mean).
template <class T>
__global__ void atomic_rows_kernel(const T* src, const void* idx, bool is64, std::int64_t istride,
                                   T* out, std::int64_t L, std::int64_t F, std::int64_t src_row,
                                   std::int64_t out_row, int r, int mode, T alpha, bool scaled,
                                   unsigned long long* count, const unsigned long long* bad) {
  if (gated(bad))
    return;
  const std::int64_t total = L * F;
  for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t i, f;
    if (total < (std::int64_t{1} << 32)) {
      i = static_cast<unsigned>(g) / static_cast<unsigned>(F);
      f = static_cast<unsigned>(g) - static_cast<unsigned>(i) * static_cast<unsigned>(F);
    } else {
      i = g / F;
      f = g - i * F;
    }
    const std::int64_t m = load_index(idx, is64, i * istride);
    T* target = out + m * out_row + f;
    if (mode == 0) {
      *target = identity<T>(r);
    } else {
      const T v = src[i * src_row + f];
      atomic_step(r, target, contribution(v, alpha, scaled));
      if (count != nullptr && f == 0)
        atomicAdd(count + m, 1ull);
    }
  }
}

template <class T>
__global__ void atomic_general_kernel(Geo4 g, const T* src, const void* idx, bool is64, T* out,
                                      int r, int mode, T alpha, bool scaled,
                                      unsigned long long* count, const unsigned long long* bad) {
  if (gated(bad))
    return;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       e < g.numel; e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t c[4];
    const std::int64_t so = offset_of(e, g.size, g.src_st, g.nd, c);
    std::int64_t io = 0;
    for (int j = 0; j < g.nd; ++j)
      io += c[j] * g.idx_st[j];
    c[g.d] = load_index(idx, is64, io);
    std::int64_t oo = 0, lin = 0;
    for (int j = 0; j < g.nd; ++j) {
      oo += c[j] * g.out_st[j];
      lin = lin * g.out_size[j] + c[j];
    }
    if (mode == 0) {
      out[oo] = identity<T>(r);
    } else {
      const T v = src[so];
      atomic_step(r, out + oo, contribution(v, alpha, scaled));
      if (count != nullptr)
        atomicAdd(count + lin, 1ull);
    }
  }
}

// mean: divides every target that received n > 0 contributions by n (+1 with include_self).
// per_row: count is per target row (rows path, F features share it), else per element.
template <class T>
__global__ void mean_kernel(Geo4 g, T* out, const unsigned long long* count, bool per_row,
                            std::int64_t F, bool self, const unsigned long long* bad) {
  if (gated(bad))
    return;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       e < g.out_numel; e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long n = count[per_row ? e / F : e];
    if (n == 0)
      continue;
    T& t = out[offset_of(e, g.out_size, g.out_st, g.nd)];
    t = t / static_cast<T>(n + (self ? 1 : 0));
  }
}

template <class T> void run_atomic(const ScatterArgs& a, cudaStream_t stream) {
  const Geo4 g = geo4(a);
  if (g.numel == 0)
    return;
  const Rows rw = rows_of(a);
  const bool vec = rw.ok;
  const int r = static_cast<int>(a.reduce);
  const bool mean = a.reduce == Reduce::mean;
  const std::int64_t count_n = mean ? (vec ? g.M : g.out_numel) : 0;
  // 64-bit counts: one target can receive more than 2^31 contributions.
  DeviceScratch scratch(256 + static_cast<std::size_t>(count_n) * 8 + 256, a.out.device,
                        Stream{stream});
  auto* bad = scratch.take<unsigned long long>(1);
  unsigned long long* count = mean ? scratch.take<unsigned long long>(count_n) : nullptr;
  check_indices(a, vec ? vector_geo(a, g) : g, vec, stream, bad);
  if (count != nullptr)
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(count, 0, static_cast<std::size_t>(count_n) * 8, stream));
  const T* src = static_cast<const T*>(a.src.data);
  T* out = static_cast<T*>(a.out.data);
  const T alpha = static_cast<T>(a.alpha);
  const bool scaled = a.alpha != 1.0;
  const int block = scatter_block();
  const bool is64 = a.index.dtype == DType::i64;
  for (int mode = a.include_self ? 1 : 0; mode <= 1; ++mode) {
    if (vec) {
      const unsigned grid = std::min<unsigned>(grid_for(rw.L * rw.F, block), 1u << 20);
      atomic_rows_kernel<T><<<grid, block, 0, stream>>>(src, a.index.data, is64, a.index.stride(0),
                                                        out, rw.L, rw.F, rw.src_row, rw.out_row, r,
                                                        mode, alpha, scaled, count, bad);
    } else {
      const unsigned grid = std::min<unsigned>(grid_for(g.numel, block), 1u << 20);
      atomic_general_kernel<T><<<grid, block, 0, stream>>>(g, src, a.index.data, is64, out, r, mode,
                                                           alpha, scaled, count, bad);
    }
    SAMEBITS_CUDA_CHECK_LAUNCH("atomic scatter");
  }
  if (mean) {
    const unsigned grid = std::min<unsigned>(grid_for(g.out_numel, block), 1u << 20);
    mean_kernel<T>
        <<<grid, block, 0, stream>>>(g, out, count, vec, vec ? rw.F : 1, a.include_self, bad);
    SAMEBITS_CUDA_CHECK_LAUNCH("mean_kernel");
  }
}

} // namespace

void run_atomic_scatter(const ScatterArgs& a, const Workspace& ws) {
  raise_deferred_index_error();
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  if (a.src.dtype == DType::f32)
    run_atomic<float>(a, stream);
  else
    run_atomic<double>(a, stream);
}

} // namespace samebits::detail

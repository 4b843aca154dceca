// CUDA variants of index_add, index_add with a plan, scatter_add and scatter_reduce.
//
//   cuda.atomic     not_guaranteed  indices checked, then every contribution is combined into
//                                   its target with atomicAdd (atomicCAS loops for prod, amax,
//                                   amin) in whatever order the hardware schedules
//   cuda.fixed_point run_to_run  index_add and scatter_add of float32 into at most 2^21 outputs,
//                                   rows of at most 4 features or an index with a value per
//                                   element: exact int64 fixed-point sums with integer atomics,
//                                   the same integers in any order; no sort (when it applies:
//                                   include/samebits/ops/scatter.hpp; cuda/scatter_fixed_point.cu)
//   cuda.sort_pull  portable        fresh indices every call: (index, position) pairs put in
//                                   stable order with CSR offsets (cuda/index_plan.cu: a counting
//                                   sort for few targets, CUB's radix sort otherwise), then each
//                                   target pulls its sources in ascending order; an index passed
//                                   again whose contents compare equal reuses the plan kept for it
//                                   (cuda/plan_cache.cu)
//   cuda.plan_pull  portable        the same pull over a plan built once (index_add with a plan)
//
// The pull is the canonical order of include/samebits/ops/scatter.hpp (sequential per target,
// ascending source position) whatever the launch shape: for rows of several features a group of
// lanes per target, lanes across features with 16-byte loads where aligned; for rows of one
// value a warp per 32 targets (or per target, for long chains) staging their sources through
// shared memory, or a thread per target over values the sort carried. For float rows of one
// value the sort carries the values themselves instead of positions, so the pull reads them
// contiguously. Scatters whose index differs across columns sort keys (column, target) and pull
// one thread per output element. The CPU computes the same order; tests hold the two to bitwise
// equality.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/index_plan.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "cuda/scatter_shared.cuh"
#include "ops/scatter.hpp"

#include <bit>
#include <climits>
#include <cstdlib>
#include <limits>
#include <math_constants.h>
#include <type_traits>

namespace samebits::detail {

namespace {

enum : int { kSum = 0, kMean = 1, kAmax = 2, kAmin = 3, kProd = 4 };
static_assert(static_cast<int>(Reduce::sum) == kSum && static_cast<int>(Reduce::mean) == kMean &&
              static_cast<int>(Reduce::amax) == kAmax && static_cast<int>(Reduce::amin) == kAmin &&
              static_cast<int>(Reduce::prod) == kProd);

// --- combination steps (same as the CPU's) ---------------------------------------------------

template <class T> __device__ __forceinline__ T step(int r, T acc, T c) {
  switch (r) {
  case kProd:
    return acc * c;
  case kAmax:
    return (c > acc || c != c) ? c : acc;
  case kAmin:
    return (c < acc || c != c) ? c : acc;
  default:
    return acc + c;
  }
}

template <class T> __device__ __forceinline__ T identity(int r) {
  switch (r) {
  case kProd:
    return T(1);
  case kAmax:
    return -CUDART_INF_F; // converts exactly to -inf for double too
  case kAmin:
    return CUDART_INF_F;
  default:
    return T(0);
  }
}

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

// Checks every index value (of `check`'s positions) before anything is written.
void check_indices(const ScatterArgs& a, const Geo4& check, cudaStream_t stream,
                   unsigned long long* bad) {
  if (check.numel == 0)
    return;
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
  const int block = block_size();
  const unsigned grid = std::min<unsigned>(grid_for(check.numel, block), 132u * 32u);
  check_kernel<<<grid, block, 0, stream>>>(check, a.index.data, a.index.dtype == DType::i64, bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("check_kernel");
  if (const std::int64_t e = first_bad_position(bad, stream); e >= 0)
    throw_bad_index(a, e, check);
}

// --- atomic (not_guaranteed) ------------------------------------------------------------------

// mode 0: write the identity into every target that receives a contribution (include_self =
// false); mode 1: combine the contributions atomically (and count them for mean).
template <class T>
__global__ void atomic_rows_kernel(const T* src, const void* idx, bool is64, std::int64_t istride,
                                   T* out, std::int64_t L, std::int64_t F, std::int64_t src_row,
                                   std::int64_t out_row, int r, int mode, T alpha, bool scaled,
                                   unsigned long long* count) {
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
                                      unsigned long long* count) {
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
                            std::int64_t F, bool self) {
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
  check_indices(a, vec ? vector_geo(a, g) : g, stream, bad);
  if (count != nullptr)
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(count, 0, static_cast<std::size_t>(count_n) * 8, stream));
  const T* src = static_cast<const T*>(a.src.data);
  T* out = static_cast<T*>(a.out.data);
  const T alpha = static_cast<T>(a.alpha);
  const bool scaled = a.alpha != 1.0;
  const int block = block_size();
  const bool is64 = a.index.dtype == DType::i64;
  for (int mode = a.include_self ? 1 : 0; mode <= 1; ++mode) {
    if (vec) {
      const unsigned grid = std::min<unsigned>(grid_for(rw.L * rw.F, block), 1u << 20);
      atomic_rows_kernel<T><<<grid, block, 0, stream>>>(src, a.index.data, is64, a.index.stride(0),
                                                        out, rw.L, rw.F, rw.src_row, rw.out_row, r,
                                                        mode, alpha, scaled, count);
    } else {
      const unsigned grid = std::min<unsigned>(grid_for(g.numel, block), 1u << 20);
      atomic_general_kernel<T><<<grid, block, 0, stream>>>(g, src, a.index.data, is64, out, r, mode,
                                                           alpha, scaled, count);
    }
    SAMEBITS_CUDA_CHECK_LAUNCH("atomic scatter");
  }
  if (mean) {
    const unsigned grid = std::min<unsigned>(grid_for(g.out_numel, block), 1u << 20);
    mean_kernel<T><<<grid, block, 0, stream>>>(g, out, count, vec, vec ? rw.F : 1, a.include_self);
    SAMEBITS_CUDA_CHECK_LAUNCH("mean_kernel");
  }
}

// --- pull over sorted sources (portable) ------------------------------------------------------

template <class T> struct Pull {
  const T* src = nullptr;
  T* out = nullptr;
  const void* order = nullptr;
  const void* offsets = nullptr;
  bool ord64 = false;
  const T* direct = nullptr; // one value per row, already in sorted order (no gather)
  // The index check's result on the same stream (all ones: no bad index); set, it gates the pull.
  const unsigned long long* bad = nullptr;
  std::int64_t M = 0, F = 1, src_row = 0, out_row = 0;
  std::int64_t sources = 0; // rows of src (for the launch shape only)
  T alpha = T(1);
  bool scaled = false, self = true;
};

// True when the pull must write nothing: the index check ran on the same stream and found a bad
// index (the caller then throws; the sort it ran on clamped keys is discarded).
template <class T> __device__ __forceinline__ bool gated(const Pull<T>& p) {
  return p.bad != nullptr && *p.bad != ~0ull;
}

// A target's result from its accumulator: mean divides by the values combined (the start value
// counts when it takes part).
template <int R, class T>
__device__ __forceinline__ T finish_pull(const Pull<T>& p, T acc, std::int64_t sources) {
  return R == kMean ? acc / static_cast<T>(sources + (p.self ? 1 : 0)) : acc;
}

// Feature f of the source at sorted position s, scaled by alpha: read where the sort carried it,
// or gathered through the order.
template <class T>
__device__ __forceinline__ T source_value(const Pull<T>& p, std::int64_t s, std::int64_t f) {
  const T v =
      p.direct != nullptr ? p.direct[s] : p.src[load_index(p.order, p.ord64, s) * p.src_row + f];
  return contribution(v, p.alpha, p.scaled);
}

// Rows of one value that the sort carried in order (p.direct): one thread per target, sequential
// over its sources.
template <class T, int R> __global__ void pull_thread_kernel(Pull<T> p) {
  if (gated(p))
    return;
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (t >= p.M)
    return;
  const std::int64_t b = load_index(p.offsets, p.ord64, t),
                     e = load_index(p.offsets, p.ord64, t + 1);
  if (b == e)
    return;
  T* o = p.out + t * p.out_row;
  auto val = [&](std::int64_t s) { return contribution(p.direct[s], p.alpha, p.scaled); };
  std::int64_t s = b;
  T acc = p.self ? *o : val(s++);
  constexpr int kAhead = 8;
  for (; s + kAhead <= e; s += kAhead) { // loads first, then the steps in order
    T v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      v[u] = val(s + u);
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      acc = step(R, acc, v[u]);
  }
  for (; s < e; ++s)
    acc = step(R, acc, val(s));
  *o = finish_pull<R>(p, acc, e - b);
}

// --- rows of one value: spans of targets per warp ---------------------------------------------
//
// A warp takes `rows` consecutive targets (32, or 1 for long chains). In the order their sources
// are one contiguous span [lo, hi), which the warp walks in windows of kSpanWindow positions:
// every lane issues kSpanWindow / 32 loads of consecutive positions (row numbers coalesced, all
// loads independent), the values go to the warp's shared stage, and then each lane folds the part
// of its own target [b, e) that the window holds, in ascending source order. Each target's chain
// of steps is the one a thread walking it alone runs, so the bits do not depend on the window, the
// rows per warp, the block or the grid; what changes is that a warp keeps 256 loads in flight
// instead of each thread waiting on its next row number.
constexpr int kSpanWindow = 256;
constexpr int kSpanWarps = 8; // warps per block at most (the stage is static shared memory)
// Up to this many sources per target on average, 32 targets per warp; beyond, a warp per target.
constexpr std::int64_t kSpanShortChain = 64;

// value(k): the (already scaled) value at position k; fold(v): one step of the lane's target.
// Inside a window positions are ints relative to its start.
template <class T, class Value, class Fold>
__device__ __forceinline__ void fold_span(T* stage, int lane, std::int64_t lo, std::int64_t hi,
                                          std::int64_t b, std::int64_t e, Value value, Fold fold) {
  constexpr int U = kSpanWindow / 32;
  auto clamp = [](std::int64_t x, int n) { return x < 0 ? 0 : x > n ? n : static_cast<int>(x); };
  for (std::int64_t w0 = lo; w0 < hi; w0 += kSpanWindow) {
    const int n = hi - w0 < kSpanWindow ? static_cast<int>(hi - w0) : kSpanWindow;
    T v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u * 32 + lane < n)
        v[u] = value(w0 + u * 32 + lane);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (u * 32 + lane < n)
        stage[u * 32 + lane] = v[u];
    __syncwarp();
    const int to = clamp(e - w0, n);
#pragma unroll 4
    for (int j = clamp(b - w0, n); j < to; ++j)
      fold(stage[j]);
    __syncwarp();
  }
}

template <class T, int R>
__global__ void __launch_bounds__(kSpanWarps * 32, sizeof(T) == 4 ? 6 : 4)
    pull_span_kernel(Pull<T> p, int rows) {
  __shared__ T stage[kSpanWarps][kSpanWindow];
  if (gated(p))
    return;
  const int lane = static_cast<int>(threadIdx.x) & 31, w = static_cast<int>(threadIdx.x) >> 5;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x >> 5);
  for (std::int64_t r0 = (std::int64_t{blockIdx.x} * (blockDim.x >> 5) + w) * rows; r0 < p.M;
       r0 += warps * rows) {
    const std::int64_t t = r0 + lane, last = r0 + rows < p.M ? r0 + rows : p.M;
    const std::int64_t lo = load_index(p.offsets, p.ord64, r0),
                       hi = load_index(p.offsets, p.ord64, last);
    const bool mine = t < last;
    const std::int64_t b = mine ? load_index(p.offsets, p.ord64, t) : hi;
    const std::int64_t e = mine ? load_index(p.offsets, p.ord64, t + 1) : hi;
    T* o = mine ? p.out + t * p.out_row : p.out;
    T acc = mine && p.self && b != e ? *o : T(0);
    bool first = !p.self;
    fold_span(
        stage[w], lane, lo, hi, b, e, [&](std::int64_t k) { return source_value(p, k, 0); },
        [&](T v) {
          acc = first ? v : step(R, acc, v);
          first = false;
        });
    if (b != e)
      *o = finish_pull<R>(p, acc, e - b);
  }
}

// A lane of a group of `group` lanes per target: its target t, its lane, and the target's sources
// [b, e) in the order. False when it has nothing to do (gated, past the last target, no sources).
struct Slot {
  std::int64_t t = 0, b = 0, e = 0;
  int lane = 0;
};
template <class T>
__device__ __forceinline__ bool group_slot(const Pull<T>& p, int group, Slot& g) {
  if (gated(p))
    return false;
  const std::int64_t gt = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  g.t = gt / group;
  if (g.t >= p.M)
    return false;
  g.lane = static_cast<int>(gt & (group - 1));
  g.b = load_index(p.offsets, p.ord64, g.t);
  g.e = load_index(p.offsets, p.ord64, g.t + 1);
  return g.b != g.e;
}

// A group of lanes per target (a power of two; several targets per warp when it is below 32),
// lanes across features with V-wide loads, sequential over the sources: the loads of B
// source rows are issued before their steps run, and the steps keep the ascending order.
template <class T, int R, int V, int B> __global__ void pull_group_kernel(Pull<T> p, int group) {
  Slot g;
  if (!group_slot(p, group, g))
    return;
  const std::int64_t t = g.t, b = g.b, e = g.e;
  const int lane = g.lane;
  for (std::int64_t f = std::int64_t{lane} * V; f < p.F; f += std::int64_t{group} * V) {
    T* o = p.out + t * p.out_row + f;
    auto row_at = [&](std::int64_t base) {
      return *reinterpret_cast<const Pack<T, V>*>(p.src + base + f);
    };
    T acc[V];
    std::int64_t s = b;
    if (p.self) {
      const Pack<T, V> w = *reinterpret_cast<const Pack<T, V>*>(o);
#pragma unroll
      for (int c = 0; c < V; ++c)
        acc[c] = w.v[c];
    } else {
      const Pack<T, V> w = row_at(load_index(p.order, p.ord64, s++) * p.src_row);
#pragma unroll
      for (int c = 0; c < V; ++c)
        acc[c] = contribution(w.v[c], p.alpha, p.scaled);
    }
    for (; s < e; s += B) {
      Pack<T, V> w[B];
#pragma unroll
      for (int u = 0; u < B; ++u)
        if (s + u < e)
          w[u] = row_at(load_index(p.order, p.ord64, s + u) * p.src_row);
#pragma unroll
      for (int u = 0; u < B; ++u)
        if (s + u < e) {
#pragma unroll
          for (int c = 0; c < V; ++c)
            acc[c] = step(R, acc[c], contribution(w[u].v[c], p.alpha, p.scaled));
        }
    }
    Pack<T, V> r;
#pragma unroll
    for (int c = 0; c < V; ++c)
      r.v[c] = finish_pull<R>(p, acc[c], e - b);
    *reinterpret_cast<Pack<T, V>*>(o) = r;
  }
}

// Few targets: a lane per (target, feature), sequential over the target's sources, B source rows
// per batch. Each step issues the loads of batch j + 1, loads the row numbers of batch j + 3 and
// then folds batch j: row numbers are two batches ahead of their values and values one batch
// ahead of their steps, so a lane waits about one memory latency per two batches. With row
// numbers only one batch ahead a lane gets one batch per latency, however many values it keeps
// in flight (docs/decisions.md, scatter pulls: few targets; bench/BASELINE.md, the index_add
// E=2M N=1000 F=64 plan-reused row). Row numbers are
// held as int (the caller checks the source rows fit). The steps keep ascending source order.
template <class T, int R, int B>
__global__ void __launch_bounds__(256, 2) pull_lane_kernel(Pull<T> p, int group) {
  Slot g;
  if (!group_slot(p, group, g))
    return;
  const std::int64_t t = g.t, b = g.b, e = g.e;
  const int lane = g.lane;
  for (std::int64_t f = lane; f < p.F; f += group) {
    T* o = p.out + t * p.out_row + f;
    const T* src = p.src + f;
    int ra[B], rb[B]; // two batches' source row numbers (the caller checks they fit in int)
    T wa[B], wb[B];   // two batches' values
    auto load_rows = [&](int(&r)[B], std::int64_t s0) {
#pragma unroll
      for (int u = 0; u < B; ++u)
        r[u] = s0 + u < e ? static_cast<int>(load_index(p.order, p.ord64, s0 + u)) : 0;
    };
    auto load_values = [&](T(&w)[B], const int(&r)[B], std::int64_t s0) {
#pragma unroll
      for (int u = 0; u < B; ++u)
        if (s0 + u < e)
          w[u] = src[r[u] * p.src_row];
    };
    T acc;
    auto fold = [&](const T(&w)[B], std::int64_t s0) {
#pragma unroll
      for (int u = 0; u < B; ++u)
        if (s0 + u < e)
          acc = step(R, acc, contribution(w[u], p.alpha, p.scaled));
    };
    std::int64_t s = b;
    if (p.self) {
      acc = *o;
    } else {
      const T v = src[load_index(p.order, p.ord64, s++) * p.src_row];
      acc = contribution(v, p.alpha, p.scaled);
    }
    if (s < e) {
      load_rows(ra, s);
      load_values(wa, ra, s);
      load_rows(rb, s + B);
      load_rows(ra, s + 2 * B);
      for (;; s += 2 * B) { // wa: batch s in flight; rb, ra: rows of batches s + B, s + 2B
        load_values(wb, rb, s + B);
        load_rows(rb, s + 3 * B);
        fold(wa, s);
        if (s + B >= e)
          break;
        load_values(wa, ra, s + 2 * B);
        load_rows(ra, s + 4 * B);
        fold(wb, s + B);
        if (s + 2 * B >= e)
          break;
      }
    }
    *o = finish_pull<R>(p, acc, e - b);
  }
}

template <class T, int R> void launch_pull_r(const Pull<T>& p, cudaStream_t stream) {
  const int block = block_size();
  if (p.F == 1) {
    // Rows of one value. Short chains (E=10M -> 1M targets): 32 targets per warp when the
    // values are gathered through the order; a thread per target when the sort carried the
    // values (contiguous; docs/decisions.md, scatter pulls: rows of one value). Long chains:
    // a warp per target. The alternative configuration swaps 32 and 1 targets per warp and never
    // takes the thread kernel.
    const bool short_chains = p.sources <= kSpanShortChain * p.M;
    const bool alt = alternative_scatter_config();
    if (short_chains && p.direct != nullptr && !alt) {
      pull_thread_kernel<T, R><<<grid_for(p.M, block), block, 0, stream>>>(p);
    } else {
      const int rows = short_chains != alt ? 32 : 1;
      pull_span_kernel<T, R>
          <<<grid_for((p.M + rows - 1) / rows * 32, block), block, 0, stream>>>(p, rows);
    }
    SAMEBITS_CUDA_CHECK_LAUNCH("pull kernel");
    return;
  }
  // Many targets: groups of up to 32 lanes per target with 16-byte loads where the rows allow
  // them. Few targets (a quarter of the threads the GPU holds; their chains are long): a lane per
  // feature, groups of up to a block, row numbers and values loaded ahead (docs/decisions.md,
  // scatter pulls: few targets; bench/BASELINE.md, the index_add E=2M N=1000 F=64 rows).
  // Sources past 2^31 - 1 rows (int row numbers) take the general lane groups.
  // The alternative configuration swaps the two; the bits are the same either way.
  constexpr int VM = static_cast<int>(16 / sizeof(T));
  const bool can_vec = p.F % VM == 0 && p.src_row % VM == 0 && p.out_row % VM == 0 &&
                       aligned16(p.src) && aligned16(p.out);
  const int vec_group = pow2_lanes((p.F + VM - 1) / VM, 32);
  const bool few = (p.M * vec_group < kOneWave / 4) != alternative_scatter_config();
  if (few && p.sources <= INT_MAX) {
    const int group = pow2_lanes(p.F, block);
    pull_lane_kernel<T, R, sizeof(T) == 4 ? 16 : 8>
        <<<grid_for(p.M * group, block), block, 0, stream>>>(p, group);
  } else if (can_vec) {
    const unsigned grid = grid_for(p.M * vec_group, block);
    switch (pull_batch(p.sources, p.M)) {
    case 4:
      pull_group_kernel<T, R, VM, 4><<<grid, block, 0, stream>>>(p, vec_group);
      break;
    case 8:
      pull_group_kernel<T, R, VM, 8><<<grid, block, 0, stream>>>(p, vec_group);
      break;
    default:
      pull_group_kernel<T, R, VM, 16><<<grid, block, 0, stream>>>(p, vec_group);
    }
  } else {
    const int group = pow2_lanes(p.F, 32);
    pull_group_kernel<T, R, 1, 16><<<grid_for(p.M * group, block), block, 0, stream>>>(p, group);
  }
  SAMEBITS_CUDA_CHECK_LAUNCH("pull kernel");
}

template <class T> void launch_pull(const Pull<T>& p, Reduce r, cudaStream_t stream) {
  if (p.M == 0 || p.F == 0)
    return;
  switch (r) {
  case Reduce::sum:
    return launch_pull_r<T, kSum>(p, stream);
  case Reduce::mean:
    return launch_pull_r<T, kMean>(p, stream);
  case Reduce::amax:
    return launch_pull_r<T, kAmax>(p, stream);
  case Reduce::amin:
    return launch_pull_r<T, kAmin>(p, stream);
  case Reduce::prod:
    return launch_pull_r<T, kProd>(p, stream);
  }
}

template <class T> Pull<T> rows_pull(const ScatterArgs& a, const Rows& rw) {
  Pull<T> p;
  p.src = static_cast<const T*>(a.src.data);
  p.out = static_cast<T*>(a.out.data);
  p.M = rw.M;
  p.sources = rw.L;
  p.F = rw.F;
  p.src_row = rw.src_row;
  p.out_row = rw.out_row;
  p.alpha = static_cast<T>(a.alpha);
  p.scaled = a.alpha != 1.0;
  p.self = a.include_self;
  return p;
}

// General scatters: keys (column, target), one thread per output element.
__global__ void general_keys_kernel(Geo4 g, const void* idx, bool is64, int* keys, int* vals,
                                    unsigned long long* bad) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       e < g.numel; e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t m = load_index(idx, is64, offset_of(e, g.size, g.idx_st, g.nd));
    const bool ok = m >= 0 && m < g.M;
    if (!ok)
      atomicMin(bad, static_cast<unsigned long long>(e));
    const std::int64_t col = (e / (g.L * g.inner)) * g.inner + e % g.inner;
    keys[e] = static_cast<int>(col * g.M + (ok ? m : 0));
    vals[e] = static_cast<int>(e);
  }
}

template <class T>
__global__ void general_pull_kernel(Geo4 g, const T* src, T* out, const int* order,
                                    const int* offsets, int r, bool self) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= g.out_numel)
    return;
  const std::int64_t b = offsets[k], e = offsets[k + 1];
  if (b == e)
    return;
  // key k = column * M + target; the output element (o, target, kk) in row-major order.
  const std::int64_t col = k / g.M, m = k - col * g.M;
  const std::int64_t lin = ((col / g.inner) * g.M + m) * g.inner + col % g.inner;
  T& target = out[offset_of(lin, g.out_size, g.out_st, g.nd)];
  std::int64_t s = b;
  T acc = self ? target : src[offset_of(order[s++], g.size, g.src_st, g.nd)];
  for (; s < e; ++s)
    acc = step(r, acc, src[offset_of(order[s], g.size, g.src_st, g.nd)]);
  if (r == kMean)
    acc = acc / static_cast<T>(e - b + (self ? 1 : 0));
  target = acc;
}

template <class T> void run_sort_pull(const ScatterArgs& a, cudaStream_t stream) {
  const Geo4 g = geo4(a);
  if (g.numel == 0)
    return;
  const Rows rw = rows_of(a);
  const bool is64 = a.index.dtype == DType::i64;
  if (rw.ok) {
    const TensorView vec = index_vector(a);
    if (const CachedPlan cached = find_cached_plan(vec, rw.M, stream)) {
      Pull<T> p = rows_pull<T>(a, rw);
      p.order = cached.order;
      p.offsets = cached.offsets;
      launch_pull(p, a.reduce, stream);
      append_last_explain("; the index equals the copy kept at its address, so its plan was reused "
                          "(automatic plan reuse: no sort)");
      return;
    }
    const bool direct = std::is_same_v<T, float> && rw.F == 1;
    const SortLayout layout = sort_layout(rw.L, rw.M);
    DeviceScratch scratch(layout.scratch_bytes + 256, a.out.device, Stream{stream});
    const WaitOnUnwind wait_on_error(stream);
    auto* bad = scratch.take<unsigned long long>(1);
    const SortBuffers sb = sort_buffers(scratch, layout);
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
    // No wait after the sort: bad keys were sorted as 0, and the pull reads the check's result
    // itself and writes nothing when it found one. One round trip to the host per call.
    sort_index_vector(vec, direct ? a.src.data : nullptr, rw.src_row, sb, bad, stream);
    Pull<T> p = rows_pull<T>(a, rw);
    p.order = sb.vals_out;
    p.offsets = sb.offsets;
    p.bad = bad;
    if (direct)
      p.direct = reinterpret_cast<const T*>(sb.vals_out);
    launch_pull(p, a.reduce, stream);
    if (const std::int64_t i = first_bad_position(bad, stream); i >= 0) // waits for the stream
      throw_bad_index(a, i, vector_geo(a, g));
    remember_index(vec, rw.M, stream); // may queue a copy of the index, which does not use scratch
    return;                            // the sort and pull are done: scratch can be freed
  }
  const std::int64_t keys = g.out_numel; // (column, target) pairs
  const SortLayout layout = sort_layout(g.numel, keys, /*allow_counting=*/false);
  DeviceScratch scratch(layout.scratch_bytes + 256, a.out.device, Stream{stream});
  const WaitOnUnwind wait_on_error(stream);
  auto* bad = scratch.take<unsigned long long>(1);
  const SortBuffers sb = sort_buffers(scratch, layout);
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
  const int block = block_size();
  general_keys_kernel<<<std::min<unsigned>(grid_for(g.numel, block), 1u << 20), block, 0, stream>>>(
      g, a.index.data, is64, sb.keys_in, sb.vals_in, bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("general_keys_kernel");
  if (const std::int64_t e = first_bad_position(bad, stream); e >= 0)
    throw_bad_index(a, e, g);
  sort_pairs_and_offsets(sb, stream);
  general_pull_kernel<T><<<grid_for(keys, block), block, 0, stream>>>(
      g, static_cast<const T*>(a.src.data), static_cast<T*>(a.out.data), sb.vals_out, sb.offsets,
      static_cast<int>(a.reduce), a.include_self);
  SAMEBITS_CUDA_CHECK_LAUNCH("general_pull_kernel");
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <class T> void run_plan_pull(const ScatterArgs& a, cudaStream_t stream) {
  const Rows rw = rows_of(a);
  if (!rw.ok) {
    // Features not contiguous: pull into contiguous copies, then copy the result back.
    Tensor src = Tensor::copy_of(a.src), out = Tensor::copy_of(a.out);
    ScatterArgs c = a;
    c.src = src.view();
    c.out = out.view();
    run_plan_pull<T>(c, stream);
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream)); // copy() runs on the default stream
    copy(out.view(), a.out);
    return;
  }
  if (rw.L == 0)
    return;
  Pull<T> p = rows_pull<T>(a, rw);
  p.order = a.plan->order.data<std::int64_t>();
  p.offsets = a.plan->offsets.data<std::int64_t>();
  p.ord64 = true;
  launch_pull(p, a.reduce, stream);
}

template <void (*F32)(const ScatterArgs&, cudaStream_t),
          void (*F64)(const ScatterArgs&, cudaStream_t)>
void by_dtype(const ScatterArgs& a, const Workspace& ws) {
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  if (a.src.dtype == DType::f32)
    F32(a, stream);
  else
    F64(a, stream);
}

std::string sort_why_not(const ScatterArgs& a) {
  const auto big = static_cast<std::int64_t>(std::numeric_limits<int>::max());
  if (a.src.numel() >= big || a.out.numel() >= big)
    return "more than 2^31 - 1 sources or output elements (32-bit sort keys)";
  return "";
}

Variant<ScatterArgs> variant(const char* op, const char* name, Determinism level, const char* how,
                             void (*run)(const ScatterArgs&, const Workspace&), bool sorts) {
  Variant<ScatterArgs> v{{op, name, DeviceType::cuda, level, how}, refuse_half, nullptr, run};
  if (sorts)
    v.why_not = [](const ScatterArgs& a) {
      const std::string half = refuse_half(a);
      return half.empty() ? sort_why_not(a) : half;
    };
  return v;
}

} // namespace

void register_cuda_scatter(Registry& r) {
  register_cuda_index_plan(r);
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  const char* atomic_how = "atomicAdd / atomicCAS into targets in hardware schedule order";
  const char* sort_how = "stable sort of (index, position) every call (counting sort up to 1536 "
                         "targets, CUB radix sort "
                         "beyond), then ordered pull per target; an index passed again at the same "
                         "address reuses its plan "
                         "when its contents compare equal";
  auto atomic = by_dtype<run_atomic<float>, run_atomic<double>>;
  auto sorted = by_dtype<run_sort_pull<float>, run_sort_pull<double>>;
  for (const char* op : {"index_add", "scatter_add", "scatter_reduce"}) {
    r.add(variant(op, "cuda.atomic", ng, atomic_how, atomic, false));
    if (std::string_view(op) != "scatter_reduce")
      r.add(fixed_point_variant(op));
    r.add(variant(op, "cuda.sort_pull", po, sort_how, sorted, true));
  }
  r.add(variant("index_add_plan", "cuda.plan_pull", po,
                "ordered pull per target over a reused GPU plan",
                by_dtype<run_plan_pull<float>, run_plan_pull<double>>, false));
}

} // namespace samebits::detail

// The kernels of the CUDA segment_reduce and aggregate (cuda/segment.cu): the input check, the
// ordered pulls (lane groups per row, the batched and the load-ahead kernels, the staged warp per
// row) and the atomic push, with the steps and finishing rules they share. Which one runs for a
// shape: ops/segment_choice.hpp. Included by cuda/segment.cu only.
#pragma once
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "ops/segment.hpp"
#include "ops/segment_choice.hpp"

#include <cstdint>
#include <cuda_runtime.h>
#include <limits>

namespace samebits::detail::segment_kernels {

using u64 = unsigned long long;
constexpr u64 kNone = ~0ull;
constexpr int kAheadBatch = kSegmentAheadBatch; // pull_ahead_kernel: positions per batch
constexpr int kDefaultBlock = 256;
constexpr std::int64_t kPushChunk = kSegmentPushChunk; // atomic push: edges per group
constexpr int kMaxGrid = 1 << 30;
constexpr int kAheadBlock = kSegmentAheadBlock; // the largest block of pull_ahead_kernel

enum Op : int { kSum = 0, kMax = 1, kMin = 2 };

// The canonical steps (ops/combine.hpp): explicitly rounded adds, nothing fuses or reassociates.
template <int OP, class T> __device__ __forceinline__ T step(T acc, T v) {
  if constexpr (OP == kMax)
    return detail::step<Reduce::amax>(acc, v);
  else if constexpr (OP == kMin)
    return detail::step<Reduce::amin>(acc, v);
  else
    return detail::step<Reduce::sum>(acc, v);
}

template <int OP, class T> __device__ __forceinline__ T start_value() {
  if constexpr (OP == kMax)
    return -std::numeric_limits<T>::infinity();
  else if constexpr (OP == kMin)
    return std::numeric_limits<T>::infinity();
  else
    return T(0);
}

__device__ __forceinline__ bool gated(const u64* bad) {
  return bad != nullptr && (bad[0] != kNone || bad[1] != kNone);
}

// --- validation ---------------------------------------------------------------------------------

// bad[0] = first position p where offsets fail (offsets[0] != 0, offsets[p] < offsets[p-1], or
// the last offset != positions); bad[1] = first position of an index outside [0, rows).
template <class I>
__global__ void check_kernel(const std::int64_t* __restrict__ off, std::int64_t segs,
                             std::int64_t positions, const I* __restrict__ idx, std::int64_t edges,
                             std::int64_t rows, u64* bad) {
  const std::int64_t n = (idx != nullptr && edges > segs + 1) ? edges : segs + 1;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < n; t += stride) {
    if (t <= segs) {
      const std::int64_t o = off[t];
      bool b = t == 0 ? o != 0 : o < off[t - 1];
      if (t == segs && o != positions)
        b = true;
      if (b)
        atomicMin(&bad[0], static_cast<u64>(t));
    }
    if (idx != nullptr && t < edges) {
      const auto v = static_cast<std::int64_t>(idx[t]);
      if (v < 0 || v >= rows)
        atomicMin(&bad[1], static_cast<u64>(t));
    }
  }
}

// An output element from its accumulator: empty rows are 0; sums and means write every NaN as
// the canonical one (amax/amin keep the NaN they selected).
template <int OP, class T>
__device__ __forceinline__ T finish_value(T acc, std::int64_t count, bool mean) {
  if (count == 0)
    return T(0);
  if (OP == kSum && mean)
    return canonical_nan(acc / static_cast<T>(count));
  if (OP == kSum)
    return canonical_nan(acc);
  return acc;
}

// --- pull (portable) ------------------------------------------------------------------------

template <class T, class I> struct PullParams {
  const T* __restrict__ x;
  std::int64_t ldx;
  T* __restrict__ out;
  std::int64_t ldo;
  const std::int64_t* __restrict__ off;
  const I* __restrict__ idx; // nullptr: position k reads row k
  std::int64_t segs;
  std::int64_t cols;
  int group; // lanes per row: a power of two <= 32
  bool mean;
  const u64* bad; // nullptr: inputs already checked
};

// The pull's frame: for each (output row s, V columns from f) of this thread's group, fold(b, e,
// f, acc) steps acc (started at the op's neutral value) through positions [b, e) in ascending
// order, then the finished values are stored with one access. Nothing runs when the check found
// a bad input.
template <class T, class I, int OP, int V, class Fold>
__device__ __forceinline__ void pull_rows(const PullParams<T, I>& p, Fold fold) {
  if (gated(p.bad))
    return;
  const int lane = static_cast<int>(threadIdx.x) & (p.group - 1);
  const std::int64_t groups = std::int64_t{gridDim.x} * blockDim.x / p.group;
  for (std::int64_t s = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / p.group; s < p.segs;
       s += groups) {
    const std::int64_t b = p.off[s], e = p.off[s + 1];
    // Column tile blockIdx.y of gridDim.y (SegmentChoice::tiles): a group folds each row once
    // per tile of group * V columns, the tiles side by side.
    for (std::int64_t f = (std::int64_t{blockIdx.y} * p.group + lane) * V; f < p.cols;
         f += std::int64_t{gridDim.y} * p.group * V) {
      T acc[V];
#pragma unroll
      for (int c = 0; c < V; ++c)
        acc[c] = start_value<OP, T>();
      fold(b, e, f, acc);
      Pack<T, V> o;
      const std::int64_t count = e - b;
#pragma unroll
      for (int c = 0; c < V; ++c)
        o.v[c] = finish_value<OP>(acc[c], count, p.mean);
      *reinterpret_cast<Pack<T, V>*>(p.out + s * p.ldo + f) = o;
    }
  }
}

// Batches of B positions: all loads are issued before any step, and the steps keep the order of
// k. Positions past the end are filled with the step's neutral value (+0 for sum, -inf/+inf for
// amax/amin), which leaves every accumulator bit unchanged: a sum that starts at +0 is never -0,
// and x + +0 == x for every other x (NaN is canonicalized at the end).
template <class T, class I, int OP, int V, int B> __global__ void pull_kernel(PullParams<T, I> p) {
  pull_rows<T, I, OP, V>(p, [&](std::int64_t b, std::int64_t e, std::int64_t f, T(&acc)[V]) {
    for (std::int64_t k = b; k < e; k += B) {
      Pack<T, V> v[B];
#pragma unroll
      for (int u = 0; u < B; ++u) {
        if (k + u < e) {
          const std::int64_t at = (p.idx ? static_cast<std::int64_t>(p.idx[k + u]) : k + u) * p.ldx;
          v[u] = *reinterpret_cast<const Pack<T, V>*>(p.x + at + f);
        } else {
#pragma unroll
          for (int c = 0; c < V; ++c)
            v[u].v[c] = start_value<OP, T>();
        }
      }
#pragma unroll
      for (int u = 0; u < B; ++u)
#pragma unroll
        for (int c = 0; c < V; ++c)
          acc[c] = step<OP>(acc[c], v[u].v[c]);
    }
  });
}

// Few long rows (fewer lanes than the GPU holds): the values of batch j + 1 are loaded before
// batch j is folded, and row numbers are loaded two batches ahead of their values, so a lane's
// loads stay in flight while it steps instead of one batch per memory latency. Positions past
// the end take the neutral value, as in pull_kernel; the chain of steps is pull_kernel's.
// Up to 250 registers a thread, so at most kAheadBlock threads a block.
template <class T, class I, int OP, int V, int B>
__global__ void __launch_bounds__(kAheadBlock) pull_ahead_kernel(PullParams<T, I> p) {
  pull_rows<T, I, OP, V>(p, [&](std::int64_t b, std::int64_t e, std::int64_t f, T(&acc)[V]) {
    std::int64_t ra[B], rb[B]; // two batches' row offsets
    Pack<T, V> wa[B], wb[B];   // two batches' values
    auto load_rows = [&](std::int64_t(&r)[B], std::int64_t k0) {
#pragma unroll
      for (int u = 0; u < B; ++u)
        r[u] = k0 + u < e ? (p.idx ? static_cast<std::int64_t>(p.idx[k0 + u]) : k0 + u) * p.ldx : 0;
    };
    auto load_values = [&](Pack<T, V>(&w)[B], const std::int64_t(&r)[B], std::int64_t k0) {
#pragma unroll
      for (int u = 0; u < B; ++u) {
        if (k0 + u < e) {
          w[u] = *reinterpret_cast<const Pack<T, V>*>(p.x + r[u] + f);
        } else {
#pragma unroll
          for (int c = 0; c < V; ++c)
            w[u].v[c] = start_value<OP, T>();
        }
      }
    };
    auto fold = [&](const Pack<T, V>(&w)[B]) {
#pragma unroll
      for (int u = 0; u < B; ++u)
#pragma unroll
        for (int c = 0; c < V; ++c)
          acc[c] = step<OP>(acc[c], w[u].v[c]);
    };
    if (b >= e)
      return;
    load_rows(ra, b);
    load_values(wa, ra, b);
    load_rows(rb, b + B);
    load_rows(ra, b + 2 * B);
    for (std::int64_t k = b;; k += 2 * B) { // wa: batch k in flight; rb, ra: rows of k + B, k + 2B
      load_values(wb, rb, k + B);
      load_rows(rb, k + 3 * B);
      fold(wa);
      if (k + B >= e)
        break;
      load_values(wa, ra, k + 2 * B);
      load_rows(ra, k + 4 * B);
      fold(wb);
      if (k + 2 * B >= e)
        break;
    }
  });
}

// --- staged pull (portable, rows of at most 32 columns) ---------------------------------------
//
// A warp per output row. The row's positions are taken in chunks: the warp loads the chunk's row
// numbers into shared memory, then every value of the chunk (all 32 lanes, many loads in flight),
// then lane f walks column f of the chunk in ascending position order. A long row (Cora has a node
// with 168 in-neighbours) thus waits for two memory latencies per chunk of up to kStageRows
// positions (pull_ahead_kernel: about one per two batches of kAheadBatch), and the chain of steps
// is the same one pull_kernel runs.
constexpr int kStageWarps = kSegmentStageWarps; // warps per block (the block is capped to match)
constexpr int kStageBytes = 4096;               // staged values per warp
constexpr int kStageRows = 128;                 // positions per chunk at most
constexpr int kStageBatch = 8; // value loads per lane issued before they are stored

template <class T, class I, int OP>
__global__ void __launch_bounds__(kStageWarps * 32) staged_kernel(PullParams<T, I> p) {
  constexpr int kVals = kStageBytes / static_cast<int>(sizeof(T));
  __shared__ T vals[kStageWarps][kVals];
  __shared__ std::int64_t base[kStageWarps][kStageRows];
  if (gated(p.bad))
    return;
  const int lane = static_cast<int>(threadIdx.x) & 31, w = static_cast<int>(threadIdx.x) >> 5;
  const int cols = static_cast<int>(p.cols);
  const int chunk = kVals / cols < kStageRows ? kVals / cols : kStageRows;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x >> 5);
  for (std::int64_t s = std::int64_t{blockIdx.x} * (blockDim.x >> 5) + w; s < p.segs; s += warps) {
    const std::int64_t b = p.off[s], e = p.off[s + 1];
    T acc = start_value<OP, T>();
    for (std::int64_t k0 = b; k0 < e; k0 += chunk) {
      const int n = static_cast<int>(e - k0 < chunk ? e - k0 : chunk);
      for (int j = lane; j < n; j += 32)
        base[w][j] = (p.idx ? static_cast<std::int64_t>(p.idx[k0 + j]) : k0 + j) * p.ldx;
      __syncwarp();
      const int total = n * cols;
      for (int t0 = 0; t0 < total; t0 += 32 * kStageBatch) {
        T v[kStageBatch];
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
          const int t = t0 + u * 32 + lane, j = t / cols;
          if (t < total)
            v[u] = p.x[base[w][j] + (t - j * cols)];
        }
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
          const int t = t0 + u * 32 + lane;
          if (t < total)
            vals[w][t] = v[u];
        }
      }
      __syncwarp();
      if (lane < cols) {
#pragma unroll 8
        for (int j = 0; j < n; ++j)
          acc = step<OP>(acc, vals[w][j * cols + lane]);
      }
      __syncwarp();
    }
    if (lane < cols)
      p.out[s * p.ldo + lane] = finish_value<OP>(acc, e - b, p.mean);
  }
}

// --- atomic push (not_guaranteed) -----------------------------------------------------------

template <class T> struct Bits;
template <> struct Bits<float> {
  using type = unsigned int;
  static __device__ type of(float v) { return __float_as_uint(v); }
  static __device__ float from(type b) { return __uint_as_float(b); }
};
template <> struct Bits<double> {
  using type = u64;
  static __device__ type of(double v) { return static_cast<u64>(__double_as_longlong(v)); }
  static __device__ double from(type b) { return __longlong_as_double(static_cast<long long>(b)); }
};

template <class T> __device__ void atomic_step(int op, T* target, T v) {
  if (op == kSum) {
    atomicAdd(target, v);
    return;
  }
  using B = typename Bits<T>::type;
  B* t = reinterpret_cast<B*>(target);
  B old = *t, assumed;
  do {
    assumed = old;
    const T cur = Bits<T>::from(assumed);
    const T next = op == kMax ? combine_max(cur, v) : combine_min(cur, v);
    const B nb = Bits<T>::of(next);
    if (nb == assumed)
      return;
    old = atomicCAS(t, assumed, nb);
  } while (old != assumed);
}

template <class T>
__global__ void fill_kernel(T* out, std::int64_t ldo, std::int64_t segs, std::int64_t cols, T value,
                            const u64* bad) {
  if (gated(bad))
    return;
  const std::int64_t n = segs * cols, stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < n; t += stride)
    out[(t / cols) * ldo + t % cols] = value;
}

template <class T, class I>
__global__ void push_kernel(PullParams<T, I> p, std::int64_t edges, int op) {
  if (gated(p.bad))
    return;
  const int lane = static_cast<int>(threadIdx.x) & (p.group - 1);
  const std::int64_t groups = std::int64_t{gridDim.x} * blockDim.x / p.group;
  const std::int64_t chunks = (edges + kPushChunk - 1) / kPushChunk;
  for (std::int64_t c = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / p.group; c < chunks;
       c += groups) {
    const std::int64_t k0 = c * kPushChunk;
    const std::int64_t k1 = k0 + kPushChunk < edges ? k0 + kPushChunk : edges;
    // The segment holding position k0: the last s with off[s] <= k0.
    std::int64_t lo = 0, hi = p.segs - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (p.off[mid] <= k0)
        lo = mid;
      else
        hi = mid - 1;
    }
    std::int64_t s = lo;
    for (std::int64_t k = k0; k < k1; ++k) {
      while (k >= p.off[s + 1])
        ++s;
      const std::int64_t r = p.idx ? static_cast<std::int64_t>(p.idx[k]) : k;
      for (std::int64_t f = lane; f < p.cols; f += p.group)
        atomic_step(op, p.out + s * p.ldo + f, p.x[r * p.ldx + f]);
    }
  }
}

// Empty rows become 0; means are divided by their count.
template <class T>
__global__ void finish_kernel(T* out, std::int64_t ldo, const std::int64_t* off, std::int64_t segs,
                              std::int64_t cols, bool mean, const u64* bad) {
  if (gated(bad))
    return;
  const std::int64_t n = segs * cols, stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < n; t += stride) {
    const std::int64_t s = t / cols;
    const std::int64_t count = off[s + 1] - off[s];
    T* o = out + s * ldo + t % cols;
    if (count == 0)
      *o = T(0);
    else if (mean)
      *o = *o / static_cast<T>(count);
  }
}

} // namespace samebits::detail::segment_kernels

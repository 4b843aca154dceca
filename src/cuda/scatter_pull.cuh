// The ordered pull of the CUDA scatter family (cuda.sort_pull, cuda.plan_pull): each target
// folds its sources in ascending source position, the canonical order of
// include/samebits/ops/scatter.hpp, whatever the launch shape. The kernels (a thread per target,
// spans of targets per warp, lane groups with 16-byte loads, a lane per feature), and their
// launch from the kernel that ops/scatter_choice.hpp chooses. Included by cuda/scatter.cu only.
#pragma once
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "cuda/launch.cuh"
#include "cuda/scatter_shared.cuh"
#include "ops/scatter_choice.hpp"

#include <cstdint>

namespace samebits::detail {

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
  // A short index's kept sort (KeptIndex): set, the order and offsets are the two addresses that
  // the sort wrote there on the device (the kept result it matched, or its own), not the above.
  const unsigned long long* chosen = nullptr;
  std::int64_t M = 0, F = 1, src_row = 0, out_row = 0;
  std::int64_t sources = 0; // rows of src (for the launch shape only)
  T alpha = T(1);
  bool scaled = false, self = true;
};

// Deferred mode: where the pull reports a bad index itself (no report kernel after it), and the
// index whose value at the bad position goes into the message. A kernel argument of its own: as
// members of Pull, these fields made the lane pull spill (24 bytes of stack; E=2M -> 1000 targets
// of 64 features, plan reused: 0.297 ms in run 136, 0.202 as an argument in run 137).
struct PullReport {
  DeferredSink sink;
  DeferredIndex at;
};

// True when the pull must write nothing: the index check ran on the same stream and found a bad
// index (the caller then throws; the sort it ran on clamped keys is discarded). With a sink, the
// first thread of the first block reports it (every pull kernel calls this in every thread first).
template <class T> __device__ __forceinline__ bool gated(const Pull<T>& p, const PullReport& r) {
  if (p.bad == nullptr)
    return false;
  const unsigned long long first = *p.bad;
  if (first == ~0ull)
    return false;
  if (r.sink.record != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 &&
      threadIdx.y == 0)
    report_to_sink(r.sink, 0, first, deferred_index_value(r.at, first));
  return true;
}

// The order and offsets that a short index's sort chose on the device (Pull::chosen); every pull
// kernel takes them first.
template <class T> __device__ __forceinline__ void take_chosen_plan(Pull<T>& p) {
  if (p.chosen != nullptr) {
    p.order = reinterpret_cast<const void*>(p.chosen[0]);
    p.offsets = reinterpret_cast<const void*>(p.chosen[1]);
  }
}

// Whether launch_pull launches a kernel for `p` (a pull that reports through its sink must run).
template <class T> bool pull_launches(const Pull<T>& p);

// A target's result from its accumulator: mean divides by the values combined (the start value
// counts when it takes part); a NaN sum, mean or prod is written as the canonical NaN.
template <int R, class T>
__device__ __forceinline__ T finish_pull(const Pull<T>& p, T acc, std::int64_t sources) {
  return finished(static_cast<Reduce>(R),
                  R == kMean ? acc / static_cast<T>(sources + (p.self ? 1 : 0)) : acc);
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
template <class T, int R> __global__ void pull_thread_kernel(Pull<T> p, PullReport r) {
  take_chosen_plan(p);
  if (gated(p, r))
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
    pull_span_kernel(Pull<T> p, int rows, PullReport r) {
  __shared__ T stage[kSpanWarps][kSpanWindow];
  take_chosen_plan(p);
  if (gated(p, r))
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
__device__ __forceinline__ bool group_slot(const Pull<T>& p, const PullReport& r, int group,
                                           Slot& g) {
  if (gated(p, r))
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
// lanes across features with V-wide loads, sequential over the sources in batches of B: a batch's
// rows are loaded with the next batch's row numbers before its steps run, and the steps keep the
// ascending order.
template <class T, int R, int V, int B>
__global__ void pull_group_kernel(Pull<T> p, int group, PullReport r) {
  take_chosen_plan(p);
  Slot g;
  if (!group_slot(p, r, group, g))
    return;
  const std::int64_t t = g.t, b = g.b, e = g.e;
  const int lane = g.lane;
  // Feature tile blockIdx.y of gridDim.y (ScatterPullChoice::tiles): each tile's lanes fold
  // their target's sources once for each of their features.
  for (std::int64_t f = (std::int64_t{blockIdx.y} * group + lane) * V; f < p.F;
       f += std::int64_t{gridDim.y} * group * V) {
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
    // Row numbers one batch ahead of their rows: a batch's rows and the next batch's numbers are
    // in flight together, so a batch waits about one memory latency. With the numbers loaded in
    // the same batch as their rows a batch waited two (Cora's hub of 169 sources set a pull's 11
    // to 14 us on an H100 that way), and loaded in one loop with the rows, or under one condition
    // (which the compiler merges back into one loop), each row's load sat beside its own number's
    // in the SASS and waited for it: about one latency a source, whatever B (sm_90 SASS of
    // 7b5ff42). Past the target's last source the number read is the last one's: in bounds,
    // unused. The empty asm keeps the compiler from moving loads across it.
    std::int64_t rows[B];
    auto load_rows = [&](std::int64_t s0) {
#pragma unroll
      for (int u = 0; u < B; ++u)
        rows[u] = load_index(p.order, p.ord64, s0 + u < e ? s0 + u : e - 1);
    };
    if (s < e)
      load_rows(s);
    for (; s < e; s += B) {
      Pack<T, V> w[B];
#pragma unroll
      for (int u = 0; u < B; ++u)
        if (s + u < e)
          w[u] = row_at(rows[u] * p.src_row);
      if (s + B < e)
        load_rows(s + B);
      asm volatile("" ::: "memory");
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
// in flight (H200, E=2M -> 1000 targets of 64 features, plan reused: 0.254 ms either way with
// one or two batches of values in flight; 0.158 ms with row numbers two ahead). Row numbers are
// held as int (the caller checks the source rows fit). The steps keep ascending source order.
template <class T, int R, int B>
__global__ void __launch_bounds__(256, 2) pull_lane_kernel(Pull<T> p, int group, PullReport r) {
  take_chosen_plan(p);
  Slot g;
  if (!group_slot(p, r, group, g))
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

// The pull's shape, as the kernel choice (ops/scatter_choice.hpp) takes it.
template <class T> ScatterPullShape pull_shape(const Pull<T>& p) {
  ScatterPullShape s;
  s.targets = p.M;
  s.features = p.F;
  s.sources = p.sources;
  s.src_row = p.src_row;
  s.out_row = p.out_row;
  s.elem_bytes = static_cast<int>(sizeof(T));
  s.direct = p.direct != nullptr;
  s.aligned = aligned16(p.src) && aligned16(p.out);
  return s;
}

// Launches the kernel that choose_scatter_pull names (its comments say why each shape takes it).
template <class T, int R>
void launch_pull_r(const Pull<T>& p, const PullReport& r, cudaStream_t stream) {
  const ScatterPullChoice c = choose_scatter_pull(pull_shape(p));
  constexpr int VM = static_cast<int>(16 / sizeof(T));
  const dim3 tiled(c.grid, c.tiles);
  switch (c.kernel) {
  case ScatterPullKernel::none:
    return;
  case ScatterPullKernel::thread:
    pull_thread_kernel<T, R><<<c.grid, c.block, 0, stream>>>(p, r);
    break;
  case ScatterPullKernel::span:
    pull_span_kernel<T, R><<<c.grid, c.block, 0, stream>>>(p, c.rows, r);
    break;
  case ScatterPullKernel::lane:
    pull_lane_kernel<T, R, sizeof(T) == 4 ? 16 : 8><<<c.grid, c.block, 0, stream>>>(p, c.group, r);
    break;
  case ScatterPullKernel::group:
    if (c.vec == 1)
      pull_group_kernel<T, R, 1, 16><<<tiled, c.block, 0, stream>>>(p, c.group, r);
    else if (c.batch == 4)
      pull_group_kernel<T, R, VM, 4><<<tiled, c.block, 0, stream>>>(p, c.group, r);
    else if (c.batch == 8)
      pull_group_kernel<T, R, VM, 8><<<tiled, c.block, 0, stream>>>(p, c.group, r);
    else
      pull_group_kernel<T, R, VM, 16><<<tiled, c.block, 0, stream>>>(p, c.group, r);
    break;
  }
  SAMEBITS_CUDA_CHECK_LAUNCH("pull kernel");
}

template <class T> bool pull_launches(const Pull<T>& p) {
  return p.M > 0 && p.F > 0 && choose_scatter_pull(pull_shape(p)).kernel != ScatterPullKernel::none;
}

template <class T>
void launch_pull(const Pull<T>& p, Reduce r, cudaStream_t stream, const PullReport& report = {}) {
  if (p.M == 0 || p.F == 0)
    return;
  switch (r) {
  case Reduce::sum:
    return launch_pull_r<T, kSum>(p, report, stream);
  case Reduce::mean:
    return launch_pull_r<T, kMean>(p, report, stream);
  case Reduce::amax:
    return launch_pull_r<T, kAmax>(p, report, stream);
  case Reduce::amin:
    return launch_pull_r<T, kAmin>(p, report, stream);
  case Reduce::prod:
    return launch_pull_r<T, kProd>(p, report, stream);
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

} // namespace samebits::detail

// CUDA variants of cumsum.
//
//   cuda.lookback_unordered  not_guaranteed  one block per 2048-element tile; a tile's carry is
//                                            found by a decoupled look-back that reduces the
//                                            predecessors' totals with a warp tree as it finds
//                                            them, so the grouping (and the bits) follow timing
//   cuda.canonical_lookback  portable        the canonical order of ops/scan.hpp: a thread per
//                                            8-element segment, a warp per group, a block per
//                                            tile; the look-back finds the nearest published
//                                            carry C_j and re-adds the published tile totals
//                                            T_j .. T_{k-1} left to right, which is exactly the
//                                            chain C_k = C_{k-1} + T_{k-1} whatever the timing
// Lines with inner > 1 (scans along a non-last dim) run as three passes, a thread per
// (line, 256-element group): group totals, the carry chain per line, the rescan; both variants
// use them (deterministic). Non-contiguous tensors are copied to contiguous ones first.
// Launch-shape test hook: SAMEBITS_CUDA_ALT_LAUNCH=1 runs the look-back kernel on a small
// persistent grid and the three passes with 64-thread blocks on a capped grid; the canonical
// order, and so the bits of the portable variant, do not change.
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/register.hpp"
#include "ops/scan.hpp"

namespace samebits::detail {

namespace {

using i64 = long long;
constexpr int kThreads = kScanTile / kScanSegment;  // 256: one thread per segment
constexpr unsigned kFull = 0xffffffffu;
static_assert(kScanGroup == 32 && kScanTileGroups * 32 == kThreads, "a warp per group");

bool alt_launch() {
  const char* e = std::getenv("SAMEBITS_CUDA_ALT_LAUNCH");
  return e != nullptr && *e != '\0' && *e != '0';
}

// Per-tile look-back state, zeroed before each launch.
template <class T> struct TileStatus {
  int* flag;                      // 0: nothing yet, 1: total posted, 2: carry-after posted
  T* total;                       // T_k
  T* after;                       // C_{k+1} = C_k + T_k
  unsigned long long* next_tile;  // tiles are claimed in order, so predecessors always run
};

__device__ __forceinline__ int load_flag(int* f) {
  return cuda::atomic_ref<int, cuda::thread_scope_device>(*f).load(cuda::memory_order_acquire);
}
__device__ __forceinline__ void store_flag(int* f, int v) {
  cuda::atomic_ref<int, cuda::thread_scope_device>(*f).store(v, cuda::memory_order_release);
}

// Carry before tile g (line starts at tile `first`), canonical: the nearest predecessor b with a
// posted carry-after, then + T_{b+1} + ... + T_{g-1} left to right. Same value in every lane.
template <class T>
__device__ T lookback_canonical(const TileStatus<T>& st, i64 g, i64 first, int lane) {
  i64 top = g - 1, base = first - 1;
  T C = T(-0.0);
  for (;;) {  // windows of 32 predecessors, nearest first; lane 0 is the nearest
    const i64 p = top - lane;
    int fl = 2;  // before the line: the virtual carry -0.0
    T c = T(-0.0);
    if (p >= first) {
      do { fl = load_flag(&st.flag[p]); } while (fl == 0);
      if (fl == 2) c = st.after[p];
    }
    const unsigned m = __ballot_sync(kFull, fl == 2);
    if (m != 0) {
      const int q = __ffs(m) - 1;
      base = top - q;
      C = __shfl_sync(kFull, c, q);
      break;
    }
    top -= 32;
  }
  for (i64 w = base + 1; w < g; w += 32) {
    const i64 p = w + lane;
    T t_mine = T(-0.0);
    if (p < g) {
      (void)load_flag(&st.flag[p]);  // >= 1 already: orders the read of the total after it
      t_mine = st.total[p];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const T t = __shfl_sync(kFull, t_mine, i);
      if (w + i < g) C = C + t;
    }
  }
  return C;
}

// Carry before tile g, the usual way: each window's totals reduced by a warp tree and added as
// found, stopping at the first posted carry-after; where that lies depends on timing.
template <class T>
__device__ T lookback_unordered(const TileStatus<T>& st, i64 g, i64 first, int lane) {
  i64 top = g - 1;
  T sum = T(-0.0);
  for (;;) {
    const i64 p = top - lane;
    int fl = 2;
    T c = T(-0.0), a = T(-0.0);
    if (p >= first) {
      do { fl = load_flag(&st.flag[p]); } while (fl == 0);
      if (fl == 2) c = st.after[p];
      else a = st.total[p];
    }
    const unsigned m = __ballot_sync(kFull, fl == 2);
    const int q = m != 0 ? __ffs(m) - 1 : 32;
    T v = lane < q ? a : (lane == q ? c : T(-0.0));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = v + __shfl_xor_sync(kFull, v, o);
    sum = sum + v;
    if (m != 0) return sum;
    top -= 32;
  }
}

template <class T> struct Vec16;
template <> struct Vec16<float> { using type = float4; };
template <> struct Vec16<double> { using type = double2; };

// Loads elements [i0, i0 + 8) of a line (missing ones as -0.0, the exact identity of +).
template <class T>
__device__ __forceinline__ void load_segment(const T* p, i64 i0, i64 len, T (&v)[kScanSegment]) {
  using V = typename Vec16<T>::type;
  constexpr int kPer = 16 / sizeof(T);
  if (i0 + kScanSegment <= len && (reinterpret_cast<std::uintptr_t>(p + i0) & 15) == 0) {
    const V* vp = reinterpret_cast<const V*>(p + i0);
#pragma unroll
    for (int q = 0; q < kScanSegment / kPer; ++q) {
      const V w = vp[q];
      const T* wt = reinterpret_cast<const T*>(&w);
#pragma unroll
      for (int j = 0; j < kPer; ++j) v[q * kPer + j] = wt[j];
    }
  } else {
#pragma unroll
    for (int j = 0; j < kScanSegment; ++j) v[j] = i0 + j < len ? p[i0 + j] : T(-0.0);
  }
}

template <class T>
__device__ __forceinline__ void store_segment(T* p, i64 i0, i64 len, const T (&v)[kScanSegment]) {
  using V = typename Vec16<T>::type;
  constexpr int kPer = 16 / sizeof(T);
  if (i0 + kScanSegment <= len && (reinterpret_cast<std::uintptr_t>(p + i0) & 15) == 0) {
    V* vp = reinterpret_cast<V*>(p + i0);
#pragma unroll
    for (int q = 0; q < kScanSegment / kPer; ++q) {
      V w;
      T* wt = reinterpret_cast<T*>(&w);
#pragma unroll
      for (int j = 0; j < kPer; ++j) wt[j] = v[q * kPer + j];
      vp[q] = w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kScanSegment; ++j)
      if (i0 + j < len) p[i0 + j] = v[j];
  }
}

// Contiguous lines [nlines, len]: a block scans one 2048-element tile at a time, claimed in
// order. x and out may be the same memory.
template <class T, bool Canonical>
__global__ void __launch_bounds__(kThreads)
scan_lines_kernel(const T* x, T* out, i64 len, i64 tiles_per_line, i64 total_tiles, TileStatus<T> st) {
  __shared__ T s_group[kScanTileGroups];
  __shared__ T s_carry;
  __shared__ i64 s_tile;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const T z = T(-0.0);
  for (;;) {
    if (tid == 0) s_tile = static_cast<i64>(atomicAdd(st.next_tile, 1ull));
    __syncthreads();
    const i64 g = s_tile;
    if (g >= total_tiles) return;
    const i64 line = g / tiles_per_line, k = g % tiles_per_line;
    const i64 i0 = k * kScanTile + static_cast<i64>(tid) * kScanSegment;
    T v[kScanSegment];
    load_segment(x + line * len, i0, len, v);
    T r[kScanSegment];
    T acc = z;
#pragma unroll
    for (int j = 0; j < kScanSegment; ++j) r[j] = acc = acc + v[j];
    // e: chain of the totals of the segments before this one in the group (the warp).
    T e = z, gacc = z;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const T t = __shfl_sync(kFull, acc, i);
      if (i == lane) e = gacc;
      gacc = gacc + t;
    }
    if (lane == 0) s_group[warp] = gacc;
    __syncthreads();
    T f = z;
    for (int w = 0; w < warp; ++w) f = f + s_group[w];
    if (warp == 0) {
      T F = z;
#pragma unroll
      for (int w = 0; w < kScanTileGroups; ++w) F = F + s_group[w];
      T C = z;
      if (lane == 0) st.total[g] = F;  // posted with flag 1, or with flag 2 for a line's first tile
      if (k > 0) {
        if (lane == 0) store_flag(&st.flag[g], 1);
        C = Canonical ? lookback_canonical(st, g, g - k, lane) : lookback_unordered(st, g, g - k, lane);
      }
      if (lane == 0) {
        st.after[g] = C + F;
        store_flag(&st.flag[g], 2);
        s_carry = C;
      }
    }
    __syncthreads();
    const T P = (s_carry + f) + e;
    T o[kScanSegment];
#pragma unroll
    for (int j = 0; j < kScanSegment; ++j) o[j] = P + r[j];
    store_segment(out + line * len, i0, len, o);
    __syncthreads();  // the shared values are reused by the next tile
  }
}

// Lines along a non-last dim of a contiguous [outer, len, inner] tensor, three passes over
// (o, group, c) triples, c fastest (coalesced). gp: [outer, ngroups, inner].
template <class T>
__global__ void group_totals_kernel(const T* x, T* gp, i64 outer, i64 len, i64 inner, i64 ngroups) {
  const i64 n = outer * ngroups * inner;
  for (i64 t = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 c = t % inner, gi = (t / inner) % ngroups, o = t / (inner * ngroups);
    const T* xl = x + o * len * inner + c;
    const i64 b = gi * kScanGroupElems, e = min(len, b + kScanGroupElems);
    T ge = T(-0.0);
    for (i64 i0 = b; i0 < e; i0 += kScanSegment) {
      T r = T(-0.0);
      const i64 i1 = min(e, i0 + kScanSegment);
      for (i64 i = i0; i < i1; ++i) r = r + xl[i * inner];
      ge = ge + r;
    }
    gp[t] = ge;
  }
}

// Group totals -> C_k + f_g (the prefix every group starts from), one thread per line.
template <class T>
__global__ void group_prefix_kernel(T* gp, i64 outer, i64 inner, i64 ngroups) {
  const i64 n = outer * inner;
  for (i64 t = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 c = t % inner, o = t / inner;
    T C = T(-0.0), f = T(-0.0);
    for (i64 gi = 0; gi < ngroups; ++gi) {
      if (gi > 0 && gi % kScanTileGroups == 0) {
        C = C + f;
        f = T(-0.0);
      }
      const i64 idx = (o * ngroups + gi) * inner + c;
      const T G = gp[idx];
      gp[idx] = C + f;
      f = f + G;
    }
  }
}

template <class T>
__global__ void group_scan_kernel(const T* x, T* out, const T* gp, i64 outer, i64 len, i64 inner,
                                  i64 ngroups) {
  const i64 n = outer * ngroups * inner;
  for (i64 t = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 c = t % inner, gi = (t / inner) % ngroups, o = t / (inner * ngroups);
    const i64 off = o * len * inner + c;
    const i64 b = gi * kScanGroupElems, e_end = min(len, b + kScanGroupElems);
    const T Pg = gp[t];
    T e = T(-0.0);
    for (i64 i0 = b; i0 < e_end; i0 += kScanSegment) {
      const T P = Pg + e;
      T r = T(-0.0);
      const i64 i1 = min(e_end, i0 + kScanSegment);
      for (i64 i = i0; i < i1; ++i) {
        r = r + x[off + i * inner];
        out[off + i * inner] = P + r;
      }
      e = e + r;
    }
  }
}

struct Dims {
  i64 outer = 1, len = 1, inner = 1;
};
Dims dims_of(const TensorView& x, int dim) {
  Dims d;
  for (int i = 0; i < dim; ++i) d.outer *= x.size(i);
  d.len = x.size(dim);
  for (int i = dim + 1; i < x.ndim; ++i) d.inner *= x.size(i);
  return d;
}

constexpr std::size_t align_up(std::size_t b) { return (b + 255) / 256 * 256; }

std::size_t scan_workspace(const CumsumArgs& a) {
  const Dims d = dims_of(a.x, a.dim);
  const std::size_t es = size_of(a.x.dtype);
  if (a.x.numel() == 0) return 0;
  if (d.inner == 1) {
    const auto tiles = static_cast<std::size_t>(d.outer * ((d.len + kScanTile - 1) / kScanTile));
    return align_up(tiles * sizeof(int)) + 2 * align_up(tiles * es) + align_up(sizeof(unsigned long long));
  }
  const i64 ngroups = (d.len + kScanGroupElems - 1) / kScanGroupElems;
  return align_up(static_cast<std::size_t>(d.outer * ngroups * d.inner) * es);
}

template <class T, bool Canonical>
void run_scan(const TensorView& x, const TensorView& out, int dim, const Workspace& ws) {
  const Dims d = dims_of(x, dim);
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  const T* xp = static_cast<const T*>(x.data);
  T* op = static_cast<T*>(out.data);
  char* w = static_cast<char*>(ws.data);
  const bool alt = alt_launch();
  if (d.inner == 1) {
    const i64 tiles_per_line = (d.len + kScanTile - 1) / kScanTile;
    const i64 total = d.outer * tiles_per_line;
    const auto nt = static_cast<std::size_t>(total);
    TileStatus<T> st{};
    st.flag = reinterpret_cast<int*>(w);
    st.total = reinterpret_cast<T*>(w + align_up(nt * sizeof(int)));
    st.after = reinterpret_cast<T*>(w + align_up(nt * sizeof(int)) + align_up(nt * sizeof(T)));
    st.next_tile = reinterpret_cast<unsigned long long*>(w + align_up(nt * sizeof(int)) + 2 * align_up(nt * sizeof(T)));
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(st.flag, 0, nt * sizeof(int), stream));
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(st.next_tile, 0, sizeof(unsigned long long), stream));
    const i64 grid = alt ? std::min<i64>(total, 37) : std::min<i64>(total, i64{1} << 30);
    scan_lines_kernel<T, Canonical><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
        xp, op, d.len, tiles_per_line, total, st);
    SAMEBITS_CUDA_CHECK_LAUNCH("scan_lines_kernel");
    return;
  }
  const i64 ngroups = (d.len + kScanGroupElems - 1) / kScanGroupElems;
  T* gp = reinterpret_cast<T*>(w);
  const int block = alt ? 64 : 256;
  auto grid_for = [&](i64 n) {
    const i64 g = (n + block - 1) / block;
    return static_cast<unsigned>(std::max<i64>(1, std::min<i64>(g, alt ? 45 : i64{1} << 30)));
  };
  const i64 n_groups = d.outer * ngroups * d.inner, n_lines = d.outer * d.inner;
  group_totals_kernel<T><<<grid_for(n_groups), block, 0, stream>>>(xp, gp, d.outer, d.len, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_totals_kernel");
  group_prefix_kernel<T><<<grid_for(n_lines), block, 0, stream>>>(gp, d.outer, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_prefix_kernel");
  group_scan_kernel<T><<<grid_for(n_groups), block, 0, stream>>>(xp, op, gp, d.outer, d.len, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_scan_kernel");
}

template <bool Canonical>
void cumsum_cuda(const CumsumArgs& a, const Workspace& ws) {
  if (a.x.numel() == 0) return;
  // Non-contiguous tensors go through contiguous copies (the kernels index [outer, len, inner]).
  Tensor xc, oc;
  TensorView x = a.x, out = a.out;
  if (!x.is_contiguous()) x = (xc = Tensor::copy_of(x, x.device)).view();
  const bool out_copy = !out.is_contiguous();
  if (out_copy) out = (oc = Tensor::empty(out.sizes(), out.dtype, out.device)).view();
  if (x.dtype == DType::f32) run_scan<float, Canonical>(x, out, a.dim, ws);
  else run_scan<double, Canonical>(x, out, a.dim, ws);
  if (out_copy) {
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(SAMEBITS_STREAM(ws.stream)));
    copy(out, a.out);
  }
}

}  // namespace

void register_cuda_scan(Registry& r) {
  r.add(Variant<CumsumArgs>{{"cumsum", "cuda.lookback_unordered", DeviceType::cuda,
                             Determinism::not_guaranteed,
                             "decoupled look-back adding predecessor totals as found (timing-dependent)"},
                            nullptr, scan_workspace, cumsum_cuda<false>});
  r.add(Variant<CumsumArgs>{{"cumsum", "cuda.canonical_lookback", DeviceType::cuda, Determinism::portable,
                             "canonical 8/256/2048 blocked chains; look-back re-adds tile totals in order"},
                            nullptr, scan_workspace, cumsum_cuda<true>});
}

}  // namespace samebits::detail

// CUDA variants of cumsum.
//
//   cuda.cub_scan            not_guaranteed  one contiguous line: CUB's single-pass scan (its
//                                            decoupled look-back combines predecessor aggregates as
//                                            it finds them, so the bits follow timing); the fastest
//                                            scan of one line, the baseline a user has today
//   cuda.lookback_unordered  not_guaranteed  a block per unit of 2048-element tiles; a unit's
//                                            carry is found by a decoupled look-back that reduces
//                                            the predecessors' totals with a warp tree as it finds
//                                            them, so the grouping (and the bits) follow timing
//   cuda.canonical_lookback  portable        the canonical order of ops/scan.hpp: a thread per
//                                            8-element segment, a warp per group, a block per
//                                            tile; the look-back finds the nearest published
//                                            carry C_j and re-adds the published tile totals
//                                            T_j .. T_{k-1} left to right, which is exactly the
//                                            chain C_k = C_{k-1} + T_{k-1} whatever the timing
// Why the portable variant is not cub::DeviceScan: CCCL 3.0 (CUDA 13.0) documents its float
// scans as not deterministic (the look-back combines predecessor aggregates as it finds them,
// like cuda.lookback_unordered), and its tile shape is a tuning choice, so no CUB scan can give
// the canonical order.
// Contiguous lines of at most 256 elements (one group) take a thread per line up to 16 elements and
// a warp per line beyond, with the steps of the canonical order (both variants, deterministic).
// Lines with inner > 1 (scans along a non-last dim) run as three passes, a thread per
// (line, 256-element group): group totals, the carry chain per line, the rescan; both variants
// use them (deterministic). Non-contiguous tensors are copied to contiguous ones first.
// A block scans a unit of consecutive canonical tiles (8 float or 4 double tiles; 4 float tiles
// where kSmallUnitTiles applies), so the look-back steps that many tiles at a time; the carry
// chain runs through the unit tile by tile, so the unit size is not part of the order.
// Kernel choice: ops/scan_choice.cpp (choose_scan_kernel). ScanTuning::alternative runs the
// look-back kernel with one-tile units on a small persistent grid and the other kernels with
// 64-thread blocks on a capped grid; the canonical order, and so the portable bits, do not change.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/register.hpp"
#include "cuda/scan_lookback.cuh"
#include "cuda/vec16.cuh"
#include "ops/launch_shape.hpp"
#include "ops/scan.hpp"
#include "ops/scan_choice.hpp"

#include <cstdint>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>
#include <limits>
#include <string>

namespace samebits::detail {

namespace {

using i64 = long long;
constexpr int kThreads = kScanTile / kScanSegment; // 256: one thread per segment
// Tiles per unit: ops/scan.hpp (scan_unit_tiles, kScanSmallUnitTiles); which one a shape takes:
// ops/scan_choice.cpp.
template <class T> constexpr int kUnitTiles = scan_unit_tiles(static_cast<int>(sizeof(T)));
constexpr int kSmallUnitTiles = kScanSmallUnitTiles;
static_assert(kScanGroup == 32 && kScanTileGroups * 32 == kThreads, "a warp per group");

// The look-back's posted words and the two look-backs: cuda/scan_lookback.cuh.
using namespace scan_lookback;

// Loads elements [i0, i0 + 8) of a line (missing ones as -0.0, the exact identity of +).
template <class T>
__device__ __forceinline__ void load_segment(const T* p, i64 i0, i64 len, T (&v)[kScanSegment]) {
  if (i0 + kScanSegment <= len && aligned16(p + i0)) {
    load16(p + i0, v);
  } else {
#pragma unroll
    for (int j = 0; j < kScanSegment; ++j)
      v[j] = i0 + j < len ? p[i0 + j] : T(-0.0);
  }
}

template <class T>
__device__ __forceinline__ void store_segment(T* p, i64 i0, i64 len, const T (&v)[kScanSegment]) {
  if (i0 + kScanSegment <= len && aligned16(p + i0)) {
    store16(p + i0, v);
  } else {
#pragma unroll
    for (int j = 0; j < kScanSegment; ++j)
      if (i0 + j < len)
        p[i0 + j] = v[j];
  }
}

// A segment's total, added in order from -0.0 (elements past a line's end, loaded as -0.0, change
// nothing).
template <class T> __device__ __forceinline__ T segment_total(const T (&v)[kScanSegment]) {
  T acc = T(-0.0);
#pragma unroll
  for (int j = 0; j < kScanSegment; ++j)
    acc = acc + v[j];
  return acc;
}

// A segment's outputs in place: v[j] = P + (v[0] + ... + v[j]), the running sum added from -0.0.
template <class T> __device__ __forceinline__ void segment_outputs(T (&v)[kScanSegment], T P) {
  T acc = T(-0.0);
#pragma unroll
  for (int j = 0; j < kScanSegment; ++j) {
    acc = acc + v[j];
    v[j] = P + acc;
  }
}

// The chain of one value per lane in lane order, from -0.0: `before` is lane i's chain of the
// values of lanes 0 .. i-1, `all` the chain of the first n (the same in every lane).
template <class T> struct WarpChain { T before, all; };
template <class T> __device__ __forceinline__ WarpChain<T> warp_chain(T x, int lane, int n = 32) {
  T before = T(-0.0), acc = T(-0.0);
  for (int i = 0; i < n; ++i) {
    const T t = __shfl_sync(kFull, x, i);
    if (i == lane)
      before = acc;
    acc = acc + t;
  }
  return {before, acc};
}

// Contiguous lines [nlines, len]: a block scans one unit of up to K <= kMax canonical
// tiles at a time, units claimed in order. The unit's values are loaded once into registers;
// pass 1 forms each tile's group chains and totals, warp 0 finds the unit's carry, pass 2 writes
// the outputs. x and out may be the same memory (everything is read before anything is written).
template <class T, bool Canonical, int kMax>
__global__ void __launch_bounds__(kThreads)
    scan_lines_kernel(const T* x, T* out, i64 len, i64 tiles_per_line, int K, i64 units_per_line,
                      i64 total_units, TileStatus<T> st) {
  __shared__ T s_group[kMax][kScanTileGroups];
  __shared__ T s_carry[kMax];
  __shared__ i64 s_unit;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const T z = T(-0.0);
  for (;;) {
    if (tid == 0)
      s_unit = static_cast<i64>(atomicAdd(st.next_unit, 1ull));
    __syncthreads();
    const i64 G = s_unit;
    if (G >= total_units)
      return;
    const i64 line = G / units_per_line, u = G % units_per_line;
    const i64 k0 = u * K; // first canonical tile of the unit, within the line
    const int nk = static_cast<int>(min(tiles_per_line - k0, static_cast<i64>(K)));
    const T* xl = x + line * len;
    T* ol = out + line * len;
    const i64 seg0 =
        k0 * kScanTile + static_cast<i64>(tid) * kScanSegment; // tile q: + q * kScanTile
    T v[kMax][kScanSegment];
#pragma unroll
    for (int q = 0; q < kMax; ++q)
      if (q < nk)
        load_segment(xl, seg0 + q * kScanTile, len, v[q]);
    T e_of[kMax]; // this thread's segment prefix in its group, per tile
#pragma unroll
    for (int q = 0; q < kMax; ++q) {
      e_of[q] = z;
      if (q < nk) {
        // e: chain of the totals of the segments before this one in the group (the warp).
        const WarpChain<T> c = warp_chain(segment_total(v[q]), lane);
        e_of[q] = c.before;
        if (lane == 0)
          s_group[q][warp] = c.all;
      }
    }
    __syncthreads();
    if (warp == 0) {
      const i64 first = line * units_per_line, tile0 = line * tiles_per_line;
      if (lane == 0) { // the unit's tile totals (posted for the canonical look-back of later units)
        T U = z;
        for (int q = 0; q < nk; ++q) {
          T F = z;
#pragma unroll
          for (int w = 0; w < kScanTileGroups; ++w)
            F = F + s_group[q][w];
          if (Canonical && u > 0)
            post(st.tile + (tile0 + k0 + q) * kWords<T>, F, kTagTotals);
          s_carry[q] = F; // the totals for now; carries below
          U = U + F;
        }
        if (!Canonical && u > 0)
          post(st.unit + G * kWords<T>, U, kTagTotals);
      }
      T C = z;
      if (u > 0)
        C = Canonical ? lookback_canonical(st, G, first, tile0, K, lane)
                      : lookback_unordered(st, G, first, lane);
      if (lane == 0) { // chain the carries through the unit: C_{k+1} = C_k + T_k
        for (int q = 0; q < nk; ++q) {
          const T F = s_carry[q];
          s_carry[q] = C;
          C = C + F;
        }
        post(st.unit + G * kWords<T>, C, kTagCarry);
      }
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kMax; ++q) {
      if (q < nk) {
        T f = z;
        for (int w = 0; w < warp; ++w)
          f = f + s_group[q][w];
        segment_outputs(v[q], (s_carry[q] + f) + e_of[q]);
        store_segment(ol, seg0 + q * kScanTile, len, v[q]);
      }
    }
    __syncthreads(); // the shared values are reused by the next unit
  }
}

// Contiguous lines of at most 2 * kScanSegment elements: a thread per line, taking the
// steps scan_lines_kernel takes for a line's first group (carry -0.0, no group before it), so the
// bits are the canonical order's. A block of 256 threads per line of a few elements would leave
// nearly all of them idle.
template <class T>
__global__ void scan_short_lines_kernel(const T* x, T* out, i64 nlines, i64 len) {
  const T z = T(-0.0);
  for (i64 line = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; line < nlines;
       line += static_cast<i64>(gridDim.x) * blockDim.x) {
    const T* xl = x + line * len;
    T* ol = out + line * len;
    T e = z; // chain of the totals of the segments before this one
    for (i64 i0 = 0; i0 < len; i0 += kScanSegment) {
      T v[kScanSegment];
      load_segment(xl, i0, len, v);
      const T total = segment_total(v);
      segment_outputs(v, (z + z) + e); // (carry + groups before) + segments before
      store_segment(ol, i0, len, v);
      e = e + total;
    }
  }
}

// Contiguous lines of 2 * kScanSegment to kScanGroupElems elements: a warp per line, lane i on
// segment i, the group's steps of scan_lines_kernel (its warp 0 on a line's first tile), with
// coalesced loads.
template <class T> __global__ void scan_warp_lines_kernel(const T* x, T* out, i64 nlines, i64 len) {
  const T z = T(-0.0);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int nseg = static_cast<int>((len + kScanSegment - 1) / kScanSegment);
  const i64 warps = static_cast<i64>(gridDim.x) * (blockDim.x / 32);
  for (i64 line = (blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x) / 32; line < nlines;
       line += warps) {
    const T* xl = x + line * len;
    T* ol = out + line * len;
    T v[kScanSegment];
    const i64 i0 = static_cast<i64>(lane) * kScanSegment;
    load_segment(xl, i0, len, v);
    // the chain of the totals of the segments before this lane's
    const T e = warp_chain(segment_total(v), lane, nseg).before;
    segment_outputs(v, (z + z) + e); // (carry + groups before) + segments before
    if (lane < nseg)
      store_segment(ol, i0, len, v);
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
      T v[kScanSegment]; // all loads of the segment issued before the adds
#pragma unroll
      for (int j = 0; j < kScanSegment; ++j)
        v[j] = i0 + j < e ? xl[(i0 + j) * inner] : T(-0.0);
      T r = T(-0.0);
#pragma unroll
      for (int j = 0; j < kScanSegment; ++j)
        if (i0 + j < e)
          r = r + v[j];
      ge = ge + r;
    }
    gp[t] = ge;
  }
}

// Group totals -> C_k + f_g (the prefix every group starts from), one thread per line.
template <class T> __global__ void group_prefix_kernel(T* gp, i64 outer, i64 inner, i64 ngroups) {
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
      T v[kScanSegment]; // the segment is read before any of it is written (x may be out)
#pragma unroll
      for (int j = 0; j < kScanSegment; ++j)
        v[j] = i0 + j < e_end ? x[off + (i0 + j) * inner] : T(-0.0);
      T r = T(-0.0);
#pragma unroll
      for (int j = 0; j < kScanSegment; ++j)
        if (i0 + j < e_end) {
          r = r + v[j];
          out[off + (i0 + j) * inner] = P + r;
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
  for (int i = 0; i < dim; ++i)
    d.outer *= x.size(i);
  d.len = x.size(dim);
  for (int i = dim + 1; i < x.ndim; ++i)
    d.inner *= x.size(i);
  return d;
}

constexpr std::size_t align_up(std::size_t b) {
  return (b + 255) / 256 * 256;
}

std::size_t scan_workspace(const CumsumArgs& a) {
  const Dims d = dims_of(a.x, a.dim);
  const std::size_t es = size_of(a.x.dtype);
  if (a.x.numel() == 0)
    return 0;
  if (d.inner == 1) { // sized for one tile per unit, the most units any launch uses
    const auto tiles = static_cast<std::size_t>(d.outer * ((d.len + kScanTile - 1) / kScanTile));
    return align_up(sizeof(u64)) + 2 * align_up(posted_bytes(tiles, es));
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
  ScanShape shape;
  shape.outer = d.outer;
  shape.len = d.len;
  shape.inner = d.inner;
  shape.elem_bytes = static_cast<int>(sizeof(T));
  shape.canonical = Canonical;
  const ScanChoice c = choose_scan_kernel(shape);
  switch (c.kernel) {
  case ScanKernel::none:
    return;
  case ScanKernel::thread_lines:
    scan_short_lines_kernel<T><<<c.grid, c.block, 0, stream>>>(xp, op, d.outer, d.len);
    SAMEBITS_CUDA_CHECK_LAUNCH("scan_short_lines_kernel");
    return;
  case ScanKernel::warp_lines:
    scan_warp_lines_kernel<T><<<c.grid, c.block, 0, stream>>>(xp, op, d.outer, d.len);
    SAMEBITS_CUDA_CHECK_LAUNCH("scan_warp_lines_kernel");
    return;
  case ScanKernel::lookback: {
    const auto nt = static_cast<std::size_t>(d.outer * c.tiles_per_line);
    // next_unit, the unit words, then the tile words (the canonical look-back only), zeroed in one
    // go.
    TileStatus<T> st{};
    const std::size_t a_units =
        align_up(posted_bytes(static_cast<std::size_t>(c.units), sizeof(T)));
    st.next_unit = reinterpret_cast<u64*>(w);
    st.unit = reinterpret_cast<u64*>(w + align_up(sizeof(u64)));
    st.tile = reinterpret_cast<u64*>(w + align_up(sizeof(u64)) + a_units);
    const std::size_t zeroed =
        align_up(sizeof(u64)) + a_units + (Canonical ? posted_bytes(nt, sizeof(T)) : 0);
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(w, 0, zeroed, stream));
    if (c.unit_slots == kSmallUnitTiles && kSmallUnitTiles != kUnitTiles<T>)
      scan_lines_kernel<T, Canonical, kSmallUnitTiles><<<c.grid, c.block, 0, stream>>>(
          xp, op, d.len, c.tiles_per_line, c.unit_tiles, c.units_per_line, c.units, st);
    else
      scan_lines_kernel<T, Canonical, kUnitTiles<T>><<<c.grid, c.block, 0, stream>>>(
          xp, op, d.len, c.tiles_per_line, c.unit_tiles, c.units_per_line, c.units, st);
    SAMEBITS_CUDA_CHECK_LAUNCH("scan_lines_kernel");
    return;
  }
  case ScanKernel::three_pass:
    break;
  }
  const i64 ngroups = (d.len + kScanGroupElems - 1) / kScanGroupElems;
  T* gp = reinterpret_cast<T*>(w);
  auto grid_of = [&](i64 n) { return grid_for(n, c.block, c.grid_cap); };
  const i64 n_groups = d.outer * ngroups * d.inner, n_lines = d.outer * d.inner;
  group_totals_kernel<T>
      <<<grid_of(n_groups), c.block, 0, stream>>>(xp, gp, d.outer, d.len, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_totals_kernel");
  group_prefix_kernel<T><<<grid_of(n_lines), c.block, 0, stream>>>(gp, d.outer, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_prefix_kernel");
  group_scan_kernel<T>
      <<<grid_of(n_groups), c.block, 0, stream>>>(xp, op, gp, d.outer, d.len, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_scan_kernel");
}

template <bool Canonical> void cumsum_cuda(const CumsumArgs& a, const Workspace& ws) {
  if (a.x.numel() == 0)
    return;
  // Non-contiguous tensors go through contiguous copies (the kernels index [outer, len, inner]).
  Tensor xc, oc;
  TensorView x = a.x, out = a.out;
  // Allocated for the op's stream: they are freed while its kernels may still be queued.
  if (!x.is_contiguous())
    x = (xc = Tensor::copy_of(x, x.device, ws.stream)).view();
  const bool out_copy = !out.is_contiguous();
  if (out_copy)
    out = (oc = Tensor::empty(out.sizes(), out.dtype, out.device, ws.stream)).view();
  if (x.dtype == DType::f32)
    run_scan<float, Canonical>(x, out, a.dim, ws);
  else
    run_scan<double, Canonical>(x, out, a.dim, ws);
  if (out_copy) {
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(SAMEBITS_STREAM(ws.stream)));
    copy(out, a.out);
  }
}

// cuda.cub_scan: CUB's inclusive sum over one contiguous line; other tensors take the variants
// below it in the table.
std::string cub_why_not(const CumsumArgs& a) {
  const Dims d = dims_of(a.x, a.dim);
  if (d.outer != 1 || d.inner != 1)
    return "scans one line only, and this tensor has several along dim";
  if (a.x.numel() > std::numeric_limits<int>::max())
    return "more than 2^31 - 1 elements";
  if (!a.x.is_contiguous() || !a.out.is_contiguous())
    return "needs contiguous x and out";
  return "";
}

// CUB's inclusive sum of a's line in a's dtype; temp == nullptr asks for its temporary size.
cudaError_t cub_sum(void* temp, std::size_t& bytes, const CumsumArgs& a, cudaStream_t stream) {
  const int n = static_cast<int>(a.x.numel());
  if (a.x.dtype == DType::f32)
    return cub::DeviceScan::InclusiveSum(temp, bytes, static_cast<const float*>(a.x.data),
                                         static_cast<float*>(a.out.data), n, stream);
  return cub::DeviceScan::InclusiveSum(temp, bytes, static_cast<const double*>(a.x.data),
                                       static_cast<double*>(a.out.data), n, stream);
}

std::size_t cub_workspace(const CumsumArgs& a) {
  if (a.x.numel() == 0)
    return 0;
  std::size_t bytes = 0;
  SAMEBITS_CUDA_CHECK(cub_sum(nullptr, bytes, a, nullptr));
  return bytes;
}

void cub_run(const CumsumArgs& a, const Workspace& ws) {
  if (a.x.numel() == 0)
    return;
  std::size_t bytes = ws.bytes;
  SAMEBITS_CUDA_CHECK(cub_sum(ws.data, bytes, a, SAMEBITS_STREAM(ws.stream)));
  SAMEBITS_CUDA_CHECK_LAUNCH("cub::DeviceScan::InclusiveSum");
}

} // namespace

void register_cuda_scan(Registry& r) {
  r.add(Variant<CumsumArgs>{
      {"cumsum", "cuda.cub_scan", DeviceType::cuda, Determinism::not_guaranteed,
       "CUB's single-pass scan of one contiguous line (look-back order follows timing)"},
      cub_why_not,
      cub_workspace,
      cub_run});
  r.add(Variant<CumsumArgs>{
      {"cumsum", "cuda.lookback_unordered", DeviceType::cuda, Determinism::not_guaranteed,
       "decoupled look-back adding predecessor totals as found (timing-dependent)"},
      nullptr,
      scan_workspace,
      cumsum_cuda<false>});
  r.add(Variant<CumsumArgs>{
      {"cumsum", "cuda.canonical_lookback", DeviceType::cuda, Determinism::portable,
       "canonical 8/256/2048 blocked chains; look-back re-adds tile totals in order"},
      nullptr,
      scan_workspace,
      cumsum_cuda<true>});
}

} // namespace samebits::detail

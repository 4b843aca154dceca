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
// Launch-shape test hook: SAMEBITS_CUDA_ALT_LAUNCH=1 runs the look-back kernel with one-tile
// units on a small persistent grid and the three passes with 64-thread blocks on a capped grid;
// the canonical order, and so the bits of the portable variant, do not change.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/register.hpp"
#include "cuda/vec16.cuh"
#include "ops/scan.hpp"

#include <cstdint>
#include <cstdlib>
#include <cub/device/device_scan.cuh>
#include <cuda/atomic>
#include <cuda_runtime.h>
#include <limits>
#include <string>

namespace samebits::detail {

namespace {

using i64 = long long;
constexpr int kThreads = kScanTile / kScanSegment; // 256: one thread per segment
// Canonical tiles per block-unit: 8 (float) or 4 (double) by default, so that a look-back step
// covers that many tiles and the chain of posted carries keeps ahead of the memory system; the
// unit's data stays in registers (64 per thread) between the two passes. 1 under the test hook.
template <class T> constexpr int kUnitTiles = 32 / static_cast<int>(sizeof(T));
// Units of 4 float tiles hold half the registers (64 instead of 118-122: more blocks per SM). The
// unordered look-back adds unit totals, so more units cost it little; the canonical one re-adds
// tile totals, so more units cost it more (docs/decisions.md, scans: units of 4 or 2 tiles;
// bench/BASELINE.md, cumsum rows), so it takes them only for lines of at most 4 tiles, which are
// one unit either way and have no look-back within the line.
constexpr int kSmallUnitTiles = 4;
template <class T> bool small_units(bool canonical, i64 tiles_per_line) {
  return sizeof(T) == 4 && (!canonical || tiles_per_line <= kSmallUnitTiles);
}
constexpr unsigned kFull = 0xffffffffu;
constexpr int kShortLine = 2 * kScanSegment; // longer lines, up to a group, take a warp each
static_assert(kScanGroup == 32 && kScanTileGroups * 32 == kThreads, "a warp per group");

bool alt_launch() {
  const char* e = std::getenv("SAMEBITS_CUDA_ALT_LAUNCH");
  return e != nullptr && *e != '\0' && *e != '0';
}

// Look-back state, zeroed before each launch. A block scans a *unit* of up to K consecutive
// canonical tiles of one line (K is a launch choice: the canonical order is per tile, and the
// tile carries chain C_{k+1} = C_k + T_k through the unit exactly as across units).
//
// Every posted value travels with its tag in each 64-bit word it occupies (sizeof(T) / 4 words of
// {tag, 32 bits of the value}). A word is stored and loaded whole (single-copy atomic), so a
// reader that finds the same nonzero tag in every word of a value has that value, with no fence
// between a value and its flag: a fence would wait for the block's output stores still in flight,
// while every other warp of the block waits at the barrier after the look-back.
using u64 = unsigned long long;
constexpr unsigned kTagTotals = 1; // a tile total (canonical), or a unit's total (unordered)
constexpr unsigned kTagCarry = 2;  // the carry after a unit
template <class T> constexpr int kWords = static_cast<int>(sizeof(T)) / 4;
// Bytes of `count` posted values of `value_bytes` each (kWords words of 8 bytes per value).
constexpr std::size_t posted_bytes(std::size_t count, std::size_t value_bytes) {
  return count * (value_bytes / 4) * sizeof(u64);
}

template <class T> struct TileStatus {
  u64* unit; // per unit, kWords<T> words: its total (tag 1, unordered) then its carry-after (tag 2)
  u64* tile; // per canonical tile, kWords<T> words: T_k (tag 1; the canonical look-back only)
  u64* next_unit; // units are claimed in order, so predecessors always run
};

__device__ __forceinline__ u64 load_word(const u64* w) {
  return cuda::atomic_ref<u64, cuda::thread_scope_device>(*const_cast<u64*>(w))
      .load(cuda::memory_order_relaxed);
}
__device__ __forceinline__ void store_word(u64* w, u64 v) {
  cuda::atomic_ref<u64, cuda::thread_scope_device>(*w).store(v, cuda::memory_order_relaxed);
}

template <class T> __device__ __forceinline__ void post(u64* at, T v, unsigned tag) {
  const u64 t = u64{tag} << 32;
  if constexpr (sizeof(T) == 4) {
    store_word(at, t | __float_as_uint(v));
  } else {
    const auto b = static_cast<u64>(__double_as_longlong(v));
    store_word(at, t | (b & 0xffffffffull));
    store_word(at + 1, t | (b >> 32));
  }
}

// The value at `at` and its tag; tag 0 while it is not posted (or, for a double, while its two
// words come from different posts).
template <class T> struct Posted {
  T value;
  unsigned tag;
};
template <class T> __device__ __forceinline__ Posted<T> read_posted(const u64* at) {
  const u64 a = load_word(at);
  if constexpr (sizeof(T) == 4) {
    return {__uint_as_float(static_cast<unsigned>(a)), static_cast<unsigned>(a >> 32)};
  } else {
    const u64 b = load_word(at + 1);
    const auto ta = static_cast<unsigned>(a >> 32), tb = static_cast<unsigned>(b >> 32);
    return {__longlong_as_double(static_cast<long long>((b << 32) | (a & 0xffffffffull))),
            ta == tb ? ta : 0u};
  }
}
template <class T> __device__ __forceinline__ T wait_posted(const u64* at) {
  Posted<T> r;
  do {
    r = read_posted<T>(at);
  } while (r.tag == 0);
  return r.value;
}

// Carry before unit G (the line's units start at `first`; its canonical tiles at `tile0`; K tiles
// per unit), canonical: the nearest predecessor unit b with a posted carry-after, then + T_t for
// every canonical tile t after b's, left to right. Same value in every lane.
template <class T>
__device__ T lookback_canonical(const TileStatus<T>& st, i64 G, i64 first, i64 tile0, int K,
                                int lane) {
  constexpr int W = kWords<T>;
  i64 top = G - 1, base = first - 1;
  T C = T(-0.0);
  for (;;) { // windows of 32 predecessor units, nearest first; lane 0 is the nearest
    const i64 p = top - lane;
    bool carry = true; // before the line: the virtual carry -0.0
    T c = T(-0.0);
    if (p >= first) {
      // Wait until unit p has posted its carry or its last tile's total, then take the carry if
      // there is one.
      const u64* last = st.tile + (tile0 + (p - first + 1) * K - 1) * W;
      for (;;) {
        const Posted<T> a = read_posted<T>(st.unit + p * W);
        if (a.tag == kTagCarry) {
          c = a.value;
          break;
        }
        if (read_posted<T>(last).tag != 0) {
          carry = false;
          break;
        }
      }
    }
    const unsigned m = __ballot_sync(kFull, carry);
    if (m != 0) {
      const int q = __ffs(m) - 1;
      base = top - q;
      C = __shfl_sync(kFull, c, q);
      break;
    }
    top -= 32;
  }
  // Tiles of units base+1 .. G-1 (all full units), local tile indices [t_begin, t_end), read
  // kReadAhead windows of 32 per round trip to memory; a total not posted yet is waited for.
  constexpr int kReadAhead = 4;
  const i64 t_begin = (base + 1 - first) * K, t_end = (G - first) * K;
  for (i64 w = t_begin; w < t_end; w += 32 * kReadAhead) {
    Posted<T> got[kReadAhead];
#pragma unroll
    for (int j = 0; j < kReadAhead; ++j) {
      const i64 t = w + j * 32 + lane;
      got[j] =
          t < t_end ? read_posted<T>(st.tile + (tile0 + t) * W) : Posted<T>{T(-0.0), kTagTotals};
    }
#pragma unroll
    for (int j = 0; j < kReadAhead; ++j) {
      if (got[j].tag == 0)
        got[j].value = wait_posted<T>(st.tile + (tile0 + w + j * 32 + lane) * W);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const T v = __shfl_sync(kFull, got[j].value, i);
        if (w + j * 32 + i < t_end)
          C = C + v;
      }
    }
  }
  return C;
}

// Carry before unit G, the usual way: each window's unit totals reduced by a warp tree and added
// as found, stopping at the first posted carry-after; where that lies depends on timing.
template <class T>
__device__ T lookback_unordered(const TileStatus<T>& st, i64 G, i64 first, int lane) {
  constexpr int W = kWords<T>;
  i64 top = G - 1;
  T sum = T(-0.0);
  for (;;) {
    const i64 p = top - lane;
    unsigned tag = kTagCarry;
    T c = T(-0.0), a = T(-0.0);
    if (p >= first) {
      Posted<T> r;
      do {
        r = read_posted<T>(st.unit + p * W);
      } while (r.tag == 0);
      tag = r.tag;
      (tag == kTagCarry ? c : a) = r.value;
    }
    const unsigned m = __ballot_sync(kFull, tag == kTagCarry);
    const int q = m != 0 ? __ffs(m) - 1 : 32;
    T v = lane < q ? a : (lane == q ? c : T(-0.0));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      v = v + __shfl_xor_sync(kFull, v, o);
    sum = sum + v;
    if (m != 0)
      return sum;
    top -= 32;
  }
}

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

// Contiguous lines of at most kShortLine elements: a thread per line, taking the
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

// Contiguous lines of kShortLine to kScanGroupElems elements: a warp per line, lane i on segment i,
// the group's steps of scan_lines_kernel (its warp 0 on a line's first tile), with coalesced loads.
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
  const bool alt = alt_launch();
  if (d.inner == 1 && d.len <= kScanGroupElems) {
    const int block = alt ? 64 : 256;
    const bool thread_per_line = d.len <= kShortLine; // else a warp per line
    const i64 per_block = thread_per_line ? block : block / 32;
    const i64 grid = std::min<i64>((d.outer + per_block - 1) / per_block, alt ? 45 : i64{1} << 30);
    if (thread_per_line) {
      scan_short_lines_kernel<T>
          <<<static_cast<unsigned>(grid), block, 0, stream>>>(xp, op, d.outer, d.len);
      SAMEBITS_CUDA_CHECK_LAUNCH("scan_short_lines_kernel");
    } else {
      scan_warp_lines_kernel<T>
          <<<static_cast<unsigned>(grid), block, 0, stream>>>(xp, op, d.outer, d.len);
      SAMEBITS_CUDA_CHECK_LAUNCH("scan_warp_lines_kernel");
    }
    return;
  }
  if (d.inner == 1) {
    const i64 tiles_per_line = (d.len + kScanTile - 1) / kScanTile;
    const auto nt = static_cast<std::size_t>(d.outer * tiles_per_line);
    const bool small = !alt && small_units<T>(Canonical, tiles_per_line);
    const int K = alt ? 1 : small ? kSmallUnitTiles : kUnitTiles<T>;
    const i64 units_per_line = (tiles_per_line + K - 1) / K;
    const i64 units = d.outer * units_per_line;
    // next_unit, the unit words, then the tile words (the canonical look-back only), zeroed in one
    // go.
    TileStatus<T> st{};
    const std::size_t a_units = align_up(posted_bytes(static_cast<std::size_t>(units), sizeof(T)));
    st.next_unit = reinterpret_cast<u64*>(w);
    st.unit = reinterpret_cast<u64*>(w + align_up(sizeof(u64)));
    st.tile = reinterpret_cast<u64*>(w + align_up(sizeof(u64)) + a_units);
    const std::size_t zeroed =
        align_up(sizeof(u64)) + a_units + (Canonical ? posted_bytes(nt, sizeof(T)) : 0);
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(w, 0, zeroed, stream));
    const i64 grid = alt ? std::min<i64>(units, 37) : std::min<i64>(units, i64{1} << 30);
    if (small)
      scan_lines_kernel<T, Canonical, kSmallUnitTiles>
          <<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(xp, op, d.len, tiles_per_line, K,
                                                                 units_per_line, units, st);
    else
      scan_lines_kernel<T, Canonical, kUnitTiles<T>>
          <<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(xp, op, d.len, tiles_per_line, K,
                                                                 units_per_line, units, st);
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
  group_totals_kernel<T>
      <<<grid_for(n_groups), block, 0, stream>>>(xp, gp, d.outer, d.len, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_totals_kernel");
  group_prefix_kernel<T><<<grid_for(n_lines), block, 0, stream>>>(gp, d.outer, d.inner, ngroups);
  SAMEBITS_CUDA_CHECK_LAUNCH("group_prefix_kernel");
  group_scan_kernel<T>
      <<<grid_for(n_groups), block, 0, stream>>>(xp, op, gp, d.outer, d.len, d.inner, ngroups);
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

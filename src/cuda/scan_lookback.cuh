// The tagged look-back protocol of the CUDA scans (cuda/scan.cu): how a block posts a tile total
// or a unit's carry as 64-bit words that carry a tag beside the value, how a reader waits for a
// posted value, and the two look-backs built on them, the canonical one (the portable variant:
// the nearest posted carry plus the tile totals after it, left to right) and the unordered one
// (a warp tree over whatever it finds first).
#pragma once
#include <cstddef>
#include <cuda/atomic>

namespace samebits::detail::scan_lookback {

using i64 = long long;
constexpr unsigned kFull = 0xffffffffu;

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

} // namespace samebits::detail::scan_lookback

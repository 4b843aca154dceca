// CUDA index plan: index validation and key building, a stable sort of (index, position) pairs
// with CSR offsets, and make_index_plan on the GPU. A short index is sorted by one block in one
// launch; up to kCountMaxKeys targets the sort is a counting sort of our own (tile histograms, one
// scan, stable placement); beyond, CUB's radix sort and offsets from the sorted keys. A stable sort
// has one result, so either way the plan holds the same integers as the CPU's counting sort.
#include "core/memory.hpp"
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/index_plan.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "ops/scatter.hpp"
#include "ops/scatter_choice.hpp"

#include <bit>
#include <cstdlib>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <limits>

namespace samebits::detail {

namespace {

constexpr int kBlock = 256;

constexpr std::int64_t kMaxBlocks = 65535 * 16;

// Blocks of kBlock threads for n threads' worth of work (the kernels loop over the rest).
unsigned blocks_for(std::int64_t n) {
  return grid_for(n, kBlock, kMaxBlocks);
}

// Calls f with the index's data as const std::int32_t* or const std::int64_t*.
template <class F> void on_index_type(const TensorView& index, F&& f) {
  if (index.dtype == DType::i32)
    f(static_cast<const std::int32_t*>(index.data));
  else
    f(static_cast<const std::int64_t*>(index.data));
}

// The key of position i: index[i * stride] when it is in [0, m); otherwise 0, and i lowers *bad
// (when bad is set).
template <class I>
__device__ __forceinline__ int key_at(const I* idx, std::int64_t stride, std::int64_t i,
                                      std::int64_t m, unsigned long long* bad) {
  const auto v = static_cast<std::int64_t>(idx[i * stride]);
  if (v >= 0 && v < m)
    return static_cast<int>(v);
  if (bad != nullptr)
    atomicMin(bad, static_cast<unsigned long long>(i));
  return 0;
}

template <class I>
__global__ void vector_keys_kernel(const I* idx, std::int64_t stride, std::int64_t n,
                                   std::int64_t m, const int* values32, std::int64_t vstride,
                                   int* keys, int* vals, unsigned long long* bad) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    keys[i] = key_at(idx, stride, i, m, bad);
    vals[i] = values32 != nullptr ? values32[i * vstride] : static_cast<int>(i);
  }
}

// offsets[k] = first position s with keys[s] >= k, for k in [0, num_keys]; position s (0..n)
// writes the offsets of the keys in (keys[s-1], keys[s]] (with keys[-1] = -1, keys[n] = num_keys).
// A thread takes kOffsetsPerThread consecutive positions, so that a few waves of threads with
// several loads each in flight cover the keys instead of one load per thread.
constexpr int kOffsetsPerThread = 8;
__global__ void offsets_kernel(const int* keys, std::int64_t n, std::int64_t num_keys,
                               int* offsets) {
  const std::int64_t chunks = n / kOffsetsPerThread + 1;
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       c < chunks; c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s0 = c * kOffsetsPerThread;
    int k[kOffsetsPerThread + 1];
#pragma unroll
    for (int u = 0; u <= kOffsetsPerThread; ++u) {
      const std::int64_t s = s0 + u - 1;
      k[u] = s < 0 ? -1 : s >= n ? static_cast<int>(num_keys) : keys[s];
    }
#pragma unroll
    for (int u = 1; u <= kOffsetsPerThread; ++u) {
      const std::int64_t s = s0 + u - 1;
      if (s > n)
        break;
      for (std::int64_t key = std::int64_t{k[u - 1]} + 1; key <= k[u]; ++key)
        offsets[key] = static_cast<int>(s);
    }
  }
}

__global__ void widen_kernel(const int* in, std::int64_t n, std::int64_t* out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

// --- counting sort for few keys ------------------------------------------------------------------
//
// The positions are cut into tiles of kCountTile, a block per tile, and each tile into one
// contiguous slice per warp. (1) Each block counts its tile's keys into counts[key][tile].
// (2) One exclusive scan of counts in that key-major order gives, for each (key, tile), where the
// tile's first pair of that key goes; the key's first cell is offsets[key]. (3) Each block counts
// again per warp, turns the counts into per-warp starts, and each warp walks its slice 32
// positions at a time in order: lanes with the same key (__match_any_sync) take consecutive places
// in lane order. Tiles, slices, chunks and lanes all follow position order, so the sort is stable.
// Keys outside [0, m) lower *bad (first pass only) and count as key 0, as in the radix path.
constexpr int kCountTile = 4096;
constexpr int kCountWarps = 8;
constexpr int kCountThreads = kCountWarps * 32;
constexpr int kCountSlice = kCountTile / kCountWarps;
constexpr int kCountMaxKeys =
    static_cast<int>(kCountSortMaxKeys); // kCountWarps x 1536 ints: 48 KiB of shared memory
// Keys of a tile per thread, and keys of [0, m) per thread, each loaded all at once.
constexpr int kCountPerThread = kCountTile / kCountThreads;
constexpr int kCountKeysPerThread = (kCountMaxKeys + kCountThreads - 1) / kCountThreads;

std::int64_t count_tiles(std::int64_t n) {
  return (n + kCountTile - 1) / kCountTile;
}
std::int64_t count_cells(std::int64_t n, std::int64_t num_keys) {
  return num_keys <= kCountMaxKeys ? num_keys * count_tiles(n) : 0;
}

template <class I>
__global__ void __launch_bounds__(kCountThreads)
    tile_count_kernel(const I* idx, std::int64_t stride, std::int64_t n, int m, int* counts,
                      unsigned long long* bad) {
  extern __shared__ int hist[]; // [m]
  const std::int64_t t0 = std::int64_t{blockIdx.x} * kCountTile;
  const int len = static_cast<int>(n - t0 < kCountTile ? n - t0 : kCountTile);
  int keys[kCountPerThread];
#pragma unroll
  for (int u = 0; u < kCountPerThread; ++u) {
    const int j = u * kCountThreads + static_cast<int>(threadIdx.x);
    keys[u] = j < len ? key_at(idx, stride, t0 + j, m, bad) : -1;
  }
  for (int k = threadIdx.x; k < m; k += kCountThreads)
    hist[k] = 0;
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kCountPerThread; ++u)
    if (keys[u] >= 0)
      atomicAdd(&hist[keys[u]], 1);
  __syncthreads();
  for (int k = threadIdx.x; k < m; k += kCountThreads)
    counts[std::int64_t{k} * gridDim.x + blockIdx.x] = hist[k];
}

__global__ void count_offsets_kernel(const int* starts, int m, std::int64_t tiles, std::int64_t n,
                                     int* offsets) {
  const std::int64_t k = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (k < m)
    offsets[k] = starts[k * tiles];
  else if (k == m)
    offsets[k] = static_cast<int>(n);
}

template <class I>
__global__ void __launch_bounds__(kCountThreads)
    tile_place_kernel(const I* idx, std::int64_t stride, std::int64_t n, int m, const int* starts,
                      const int* values32, std::int64_t vstride, int* out) {
  extern __shared__ int cnt[]; // [kCountWarps][m]
  const int lane = static_cast<int>(threadIdx.x) & 31, w = static_cast<int>(threadIdx.x) >> 5;
  for (int k = threadIdx.x; k < kCountWarps * m; k += kCountThreads)
    cnt[k] = 0;
  const std::int64_t t0 = std::int64_t{blockIdx.x} * kCountTile;
  const int len = static_cast<int>(n - t0 < kCountTile ? n - t0 : kCountTile);
  const int s0 = w * kCountSlice, s1 = s0 + kCountSlice < len ? s0 + kCountSlice : len;
  int* mine = cnt + w * m;
  constexpr int U = kCountSlice / 32;
  int keys[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int j = s0 + u * 32 + lane;
    keys[u] = j < s1 ? key_at(idx, stride, t0 + j, m, nullptr) : -1;
  }
  int at[kCountKeysPerThread]; // the tile's start for keys threadIdx.x + q * kCountThreads
#pragma unroll
  for (int q = 0; q < kCountKeysPerThread; ++q) {
    const int k = static_cast<int>(threadIdx.x) + q * kCountThreads;
    at[q] = k < m ? starts[std::int64_t{k} * gridDim.x + blockIdx.x] : 0;
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (keys[u] >= 0)
      atomicAdd(&mine[keys[u]], 1);
  __syncthreads();
#pragma unroll
  for (int q = 0; q < kCountKeysPerThread; ++q) { // per-warp counts -> per-warp starts
    const int k = static_cast<int>(threadIdx.x) + q * kCountThreads;
    if (k >= m)
      break;
    for (int v = 0; v < kCountWarps; ++v) {
      const int c = cnt[v * m + k];
      cnt[v * m + k] = at[q];
      at[q] += c;
    }
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int k = keys[u];
    const unsigned peers = __match_any_sync(0xffffffffu, k);
    if (k >= 0) {
      const std::int64_t i = t0 + s0 + u * 32 + lane;
      const int place = mine[k] + __popc(peers & ((1u << lane) - 1u));
      out[place] = values32 != nullptr ? values32[i * vstride] : static_cast<int>(i);
    }
    __syncwarp();
    if (k >= 0 && (peers >> lane) == 1u)
      mine[k] += __popc(peers); // the group's last lane
    __syncwarp();
  }
}

std::size_t scan_temp_bytes(std::int64_t cells) {
  std::size_t bytes = 0;
  SAMEBITS_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const int*>(nullptr),
                                    static_cast<int*>(nullptr), static_cast<int>(cells)));
  return bytes;
}

template <class I>
void counting_sort(const I* idx, std::int64_t stride, const int* values32, std::int64_t vstride,
                   const SortBuffers& b, unsigned long long* bad, cudaStream_t stream) {
  const int m = static_cast<int>(b.num_keys);
  const auto tiles = static_cast<unsigned>(count_tiles(b.n));
  const std::int64_t cells = b.num_keys * tiles;
  tile_count_kernel<I><<<tiles, kCountThreads, static_cast<std::size_t>(m) * 4, stream>>>(
      idx, stride, b.n, m, b.counts, bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("tile_count_kernel");
  std::size_t temp = b.temp_bytes;
  SAMEBITS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(b.temp, temp, static_cast<const int*>(b.counts),
                                                    b.starts, static_cast<int>(cells), stream));
  count_offsets_kernel<<<blocks_for(m + 1), kBlock, 0, stream>>>(b.starts, m, tiles, b.n,
                                                                 b.offsets);
  SAMEBITS_CUDA_CHECK_LAUNCH("count_offsets_kernel");
  tile_place_kernel<I>
      <<<tiles, kCountThreads, static_cast<std::size_t>(m) * 4 * kCountWarps, stream>>>(
          idx, stride, b.n, m, b.starts, values32, vstride, b.vals_out);
  SAMEBITS_CUDA_CHECK_LAUNCH("tile_place_kernel");
}

int key_bits(std::int64_t num_keys) {
  return std::max(1, static_cast<int>(std::bit_width(
                         static_cast<std::uint64_t>(std::max<std::int64_t>(num_keys - 1, 1)))));
}

// --- a one-block sort's kept indices (KeptIndex) ----------------------------------------------
//
// The slot whose copy equals the index (-1: none, the caller sorts), decided by the block that
// finishes comparing last (kKeptOtherBlock in every other block, which then has nothing more to
// do). Block k compares positions k * blockDim + t, then steps of the grid, each with every filled
// slot: with a block per kKeptMatchPositions positions, each thread loads one position and its
// copies at once. One
// block reading Cora's 13264 positions and its copies took 8.7 us a call on an H100 (GCN on Cora
// under the mode, torch.profiler): one SM's bandwidth. On a match the chosen addresses name that
// slot's result.
constexpr int kKeptOtherBlock = -2;

// Blocks for the comparison of n positions (one when nothing is kept: no comparison then).
unsigned kept_match_blocks(int n, const KeptIndex& kept) {
  if (!kept.on())
    return 1;
  return static_cast<unsigned>(std::max(1, (n + kKeptMatchPositions - 1) / kKeptMatchPositions));
}

__device__ void choose_slot(const KeptIndex& kept, int slot) {
  const unsigned long long now = kept.words[kKeptClock] + 1;
  kept.words[kKeptClock] = now;
  kept.words[slot] = now;
  kept.words[kKeptChosen] = reinterpret_cast<unsigned long long>(kept.order[slot]);
  kept.words[kKeptChosen + 1] = reinterpret_cast<unsigned long long>(kept.offsets[slot]);
}

// The slots this block found different from the index, ORed over its threads (the same in every
// thread).
template <class I>
__device__ unsigned block_differs(const I* idx, std::int64_t stride, int n, const KeptIndex& kept,
                                  unsigned filled) {
  __shared__ unsigned differs_any;
  if (threadIdx.x == 0)
    differs_any = 0;
  __syncthreads();
  unsigned differs = 0;
  const int step = static_cast<int>(gridDim.x * blockDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += step) {
    const auto v = static_cast<std::int64_t>(idx[i * stride]);
#pragma unroll
    for (int s = 0; s < kKeptSlots; ++s)
      if ((filled >> s & 1u) != 0 && v != kept.copy[s][i])
        differs |= 1u << s;
  }
  if (differs != 0)
    atomicOr(&differs_any, differs);
  __syncthreads();
  return differs_any;
}

template <class I>
__device__ int kept_index_match(const I* idx, std::int64_t stride, int n, const KeptIndex& kept) {
  if (kept.words == nullptr)
    return -1;
  // The filled slots, read by one thread for its block. Only the deciding block writes the words,
  // after every block has taken its ticket (so after every block has read them): all blocks read
  // the same. With nothing filled the blocks still take their tickets, and the last one sorts: a
  // block that sorted at once would write the words while others may not have read them yet.
  __shared__ unsigned filled_words;
  if (threadIdx.x == 0) {
    unsigned f = 0;
#pragma unroll
    for (int s = 0; s < kKeptSlots; ++s)
      f |= kept.words[s] != 0 ? 1u << s : 0u;
    filled_words = f;
  }
  __syncthreads();
  const unsigned filled = filled_words;
  unsigned differs = filled != 0 ? block_differs(idx, stride, n, kept, filled) : 0u;
  if (gridDim.x > 1) {
    __shared__ bool deciding;
    __shared__ unsigned differs_all;
    if (threadIdx.x == 0) {
      if (differs != 0)
        atomicOr(reinterpret_cast<unsigned*>(kept.words + kKeptDiffers), differs);
      __threadfence(); // this block's differences before its ticket
      const unsigned long long ticket = atomicAdd(kept.words + kKeptArrived, 1ull);
      deciding = ticket == gridDim.x - 1;
      if (deciding) { // every other block's differences are in: take them, and reset both words
        __threadfence();
        differs_all = atomicExch(reinterpret_cast<unsigned*>(kept.words + kKeptDiffers), 0u);
        kept.words[kKeptArrived] = 0;
      }
    }
    __syncthreads();
    if (!deciding)
      return kKeptOtherBlock;
    differs = differs_all;
  }
  const unsigned same = filled & ~differs;
  if (same == 0)
    return -1;
  const int slot = __ffs(static_cast<int>(same)) - 1;
  if (threadIdx.x == 0)
    choose_slot(kept, slot);
  return slot;
}

// Where a sort that matched no slot writes: an empty slot, else the least recently used one (the
// same for every thread: the words are read before the sort's barriers, written after them);
// vals_out and offsets then name that slot's order and offsets. 0, and nothing changed, without
// kept slots.
__device__ int sort_into_kept_slot(const KeptIndex& kept, int*& vals_out, int*& offsets) {
  if (kept.words == nullptr)
    return 0;
  int slot = 0;
  for (int s = 1; s < kKeptSlots; ++s)
    if (kept.words[s] < kept.words[slot])
      slot = s;
  vals_out = kept.order[slot];
  offsets = kept.offsets[slot];
  return slot;
}

// After a sort into slot `slot` (first_bad final): keeps the index with it when every value was
// in range, else leaves the slot empty; either way the pull reads the slot.
template <class I>
__device__ void keep_index(const I* idx, std::int64_t stride, int n, const KeptIndex& kept,
                           int slot, unsigned long long first_bad) {
  if (kept.words == nullptr)
    return;
  const bool ok = first_bad == ~0ull;
  if (ok)
    for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
      kept.copy[slot][i] = static_cast<int>(idx[i * stride]);
  __syncthreads(); // every thread has read the words (sort_into_kept_slot)
  if (threadIdx.x == 0) {
    choose_slot(kept, slot);
    if (!ok)
      kept.words[slot] = 0;
    ++kept.words[kKeptSorts];
  }
}

// --- one-block sort for short indices -------------------------------------------------------
//
// A single block of kBlockThreads threads does the whole sort in one launch: thread t loads keys
// t * Items .. + Items - 1 (position order is the blocked arrangement, so CUB's block radix sort,
// stable in that arrangement, is stable in position order); positions past n get key m, which
// sorts after every real key. The sorted keys go to shared memory, and offsets[k] is a binary
// search for the first key >= k. The kernel writes *bad itself (the first bad position, or all
// ones): no memset before it. Two shapes: 32-bit keys and values, 11 a thread (values may be
// carried 32-bit payloads), and 16-bit keys and positions, 16 a thread (the exchanges take half the
// shared memory: up to 16384 positions and 65535 targets, no carried values). Given kept indices,
// the launch has a block per kKeptMatchPositions positions for the comparison, and the sort runs
// in the one that decides.
constexpr int kBlockThreads = 1024;

template <class Key, class Val, int Items, class I>
__global__ void __launch_bounds__(kBlockThreads)
    block_sort_kernel(const I* idx, std::int64_t stride, int n, int m, int bits,
                      const int* values32, std::int64_t vstride, int* vals_out, int* offsets,
                      unsigned long long* bad, KeptIndex kept) {
  using Sort = cub::BlockRadixSort<Key, kBlockThreads, Items, Val>;
  if (const int match = kept_index_match(idx, stride, n, kept); match != -1) {
    if (match >= 0 && bad != nullptr && threadIdx.x == 0) // a kept sort's result stands
      *bad = ~0ull;
    return;
  }
  const int slot = sort_into_kept_slot(kept, vals_out, offsets);
  __shared__ union {
    typename Sort::TempStorage sort;
    Key sorted[kBlockThreads * Items];
  } smem;
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0)
    first_bad = ~0ull;
  __syncthreads();
  Key keys[Items];
  Val vals[Items];
#pragma unroll
  for (int u = 0; u < Items; ++u) {
    const int i = static_cast<int>(threadIdx.x) * Items + u;
    if (i < n) {
      keys[u] = static_cast<Key>(key_at(idx, stride, i, m, &first_bad));
      vals[u] = static_cast<Val>(values32 != nullptr ? values32[i * vstride] : i);
    } else {
      keys[u] = static_cast<Key>(m);
      vals[u] = static_cast<Val>(i);
    }
  }
  Sort(smem.sort).Sort(keys, vals, 0, bits);
  __syncthreads(); // the sort's storage becomes the sorted keys
#pragma unroll
  for (int u = 0; u < Items; ++u) {
    const int s = static_cast<int>(threadIdx.x) * Items + u;
    smem.sorted[s] = keys[u];
    if (s < n)
      vals_out[s] = static_cast<int>(vals[u]);
  }
  __syncthreads();
  for (int k = static_cast<int>(threadIdx.x); k <= m; k += kBlockThreads) {
    int lo = 0, hi = n; // keys at n and beyond are m: offsets[m] = n
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (static_cast<int>(smem.sorted[mid]) < k)
        lo = mid + 1;
      else
        hi = mid;
    }
    offsets[k] = lo;
  }
  if (bad != nullptr && threadIdx.x == 0)
    *bad = first_bad;
  keep_index(idx, stride, n, kept, slot, first_bad); // first_bad is final since the sort's barriers
}

constexpr int kBlockItems32 = static_cast<int>(kBlockSortMaxPositions / kBlockThreads);
constexpr int kBlockItems16 = static_cast<int>(kBlockSort16MaxPositions / kBlockThreads);
static_assert(std::int64_t{kBlockThreads} * kBlockItems32 == kBlockSortMaxPositions);
static_assert(std::int64_t{kBlockThreads} * kBlockItems16 == kBlockSort16MaxPositions);
static_assert(kBlockSort16MaxPositions <= 65536 && kBlockSort16MaxKeys <= 65535);

// --- one-block counting sort for short indices into few targets --------------------------------
//
// Eight warps of one block, each a contiguous slice of the positions. (1) Each warp walks its
// slice 32 positions at a time and counts its keys into its own row of 16-bit counters (lanes
// with the same key, found by __match_any_sync, add once: no atomics). (2) One exclusive scan in
// key-major order over (key, warp) turns the counts into each warp's first place for each key, and
// gives the offsets. (3) Each warp walks its slice again and places its positions: lanes with the
// same key take consecutive places in lane order. Slices, chunks and lanes follow position order,
// so the sort is stable. Keys outside [0, m) lower *bad and count as key 0, as in the other sorts.
// The block has 32 warps: all of them compare the index with the kept copies (with the other
// blocks of the launch, KeptIndex) and copy it into a slot (a training's usual call: the same
// index every epoch in a fresh tensor, where 8 warps took about 10 us to find the match on Cora's
// 13264 positions), the first 8 count and place (their 16-bit counters fill the shared memory).
constexpr int kBlockCountWarps = 8;
constexpr int kBlockCountThreads = 1024;
static_assert(kBlockCountThreads % 32 == 0 && kBlockCountThreads / 32 >= kBlockCountWarps);
// A position per thread in the comparison with the kept copies (kept_match_blocks).
static_assert(kBlockThreads == kKeptMatchPositions && kBlockCountThreads == kKeptMatchPositions);
// Each warp loads the keys (and carried values) of this many 32-position chunks before it counts
// or places them: the loads are in flight together, where one chunk at a time waited for each.
constexpr int kCountBatch = 8;
static_assert(kBlockCountMaxPositions <= 65535, "16-bit counts and starts");

template <class I>
__global__ void __launch_bounds__(kBlockCountThreads)
    block_count_kernel(const I* idx, std::int64_t stride, int n, int m, const int* values32,
                       std::int64_t vstride, int* vals_out, int* offsets, unsigned long long* bad,
                       KeptIndex kept) {
  // Warp scans: a small TempStorage (the raking default for 1024 threads would pass 48 KiB).
  using Scan = cub::BlockScan<int, kBlockCountThreads, cub::BLOCK_SCAN_WARP_SCANS>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ unsigned long long first_bad;
  __shared__ unsigned short cnt[kBlockCountWarps * kBlockCountMaxKeys]; // [warp][key]
  const int lane = static_cast<int>(threadIdx.x) & 31, w = static_cast<int>(threadIdx.x) >> 5;
  if (const int match = kept_index_match(idx, stride, n, kept); match != -1) {
    if (match >= 0 && bad != nullptr && threadIdx.x == 0) // a kept sort's result stands
      *bad = ~0ull;
    return;
  }
  const int slot = sort_into_kept_slot(kept, vals_out, offsets);
  if (threadIdx.x == 0)
    first_bad = ~0ull;
  for (int k = static_cast<int>(threadIdx.x); k < kBlockCountWarps * m; k += kBlockCountThreads)
    cnt[k] = 0;
  __syncthreads();
  // Warps from kBlockCountWarps on get empty slices (and never touch `mine`).
  const int slice = (n + kBlockCountWarps - 1) / kBlockCountWarps;
  const int s0 = min(w * slice, n), s1 = min(s0 + slice, n);
  unsigned short* mine = cnt + min(w, kBlockCountWarps - 1) * m;
  for (int b0 = s0; b0 < s1; b0 += 32 * kCountBatch) { // (1) counts
    int keys[kCountBatch];
#pragma unroll
    for (int u = 0; u < kCountBatch; ++u) {
      const int j = b0 + u * 32 + lane;
      keys[u] = j < s1 ? key_at(idx, stride, j, m, &first_bad) : -1;
    }
#pragma unroll
    for (int u = 0; u < kCountBatch; ++u) {
      const int k = keys[u];
      const unsigned peers = __match_any_sync(0xffffffffu, k);
      if (k >= 0 && (peers >> lane) == 1u) // the group's last lane
        mine[k] = static_cast<unsigned short>(mine[k] + __popc(peers));
      __syncwarp();
    }
  }
  __syncthreads();
  // (2) Thread t owns keys [k0, k1): their counts over every warp, one block-wide scan, then
  // each (key, warp) counter becomes that warp's first place for the key.
  const int per = (m + kBlockCountThreads - 1) / kBlockCountThreads;
  const int k0 = min(static_cast<int>(threadIdx.x) * per, m), k1 = min(k0 + per, m);
  int total = 0;
  for (int k = k0; k < k1; ++k)
    for (int v = 0; v < kBlockCountWarps; ++v)
      total += cnt[v * m + k];
  int start = 0;
  Scan(scan).ExclusiveSum(total, start);
  for (int k = k0; k < k1; ++k) {
    offsets[k] = start;
    for (int v = 0; v < kBlockCountWarps; ++v) {
      const int c = cnt[v * m + k];
      cnt[v * m + k] = static_cast<unsigned short>(start);
      start += c;
    }
  }
  if (threadIdx.x == 0)
    offsets[m] = n;
  __syncthreads();
  for (int b0 = s0; b0 < s1; b0 += 32 * kCountBatch) { // (3) places
    int keys[kCountBatch], vals[kCountBatch];
#pragma unroll
    for (int u = 0; u < kCountBatch; ++u) {
      const int j = b0 + u * 32 + lane;
      keys[u] = j < s1 ? key_at(idx, stride, j, m, nullptr) : -1;
      vals[u] = j < s1 && values32 != nullptr ? values32[j * vstride] : j;
    }
#pragma unroll
    for (int u = 0; u < kCountBatch; ++u) {
      const int k = keys[u];
      const unsigned peers = __match_any_sync(0xffffffffu, k);
      if (k >= 0) {
        const int place = mine[k] + __popc(peers & ((1u << lane) - 1u));
        vals_out[place] = vals[u];
      }
      __syncwarp();
      if (k >= 0 && (peers >> lane) == 1u)
        mine[k] = static_cast<unsigned short>(mine[k] + __popc(peers));
      __syncwarp();
    }
  }
  if (bad != nullptr && threadIdx.x == 0)
    *bad = first_bad;
  keep_index(idx, stride, n, kept, slot, first_bad); // first_bad is final since the counts' barrier
}

template <class I>
void block_sort(const I* idx, std::int64_t stride, const int* values32, std::int64_t vstride,
                const SortBuffers& b, unsigned long long* bad, cudaStream_t stream,
                KeptIndex kept) {
  const int n = static_cast<int>(b.n), m = static_cast<int>(b.num_keys);
  const int bits = key_bits(b.num_keys + 1);
  const unsigned grid = kept_match_blocks(n, kept); // the sort itself runs in one of them
  if (b.block_count)
    block_count_kernel<I><<<grid, kBlockCountThreads, 0, stream>>>(
        idx, stride, n, m, values32, vstride, b.vals_out, b.offsets, bad, kept);
  else if (b.block16)
    block_sort_kernel<unsigned short, unsigned short, kBlockItems16>
        <<<grid, kBlockThreads, 0, stream>>>(idx, stride, n, m, bits, nullptr, 0, b.vals_out,
                                             b.offsets, bad, kept);
  else
    block_sort_kernel<int, int, kBlockItems32><<<grid, kBlockThreads, 0, stream>>>(
        idx, stride, n, m, bits, values32, vstride, b.vals_out, b.offsets, bad, kept);
  SAMEBITS_CUDA_CHECK_LAUNCH("block_sort_kernel");
}

// Stable radix sort of n (key, value) pairs on the key's low `bits` bits; temp == nullptr asks
// for the temporary size in `bytes`.
cudaError_t radix_sort_pairs(void* temp, std::size_t& bytes, const int* keys_in, int* keys_out,
                             const int* vals_in, int* vals_out, std::int64_t n, int bits,
                             cudaStream_t stream) {
  return cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out,
                                         static_cast<int>(n), 0, bits, stream);
}

std::size_t cub_temp_bytes(std::int64_t n, std::int64_t num_keys) {
  std::size_t bytes = 0;
  SAMEBITS_CUDA_CHECK(radix_sort_pairs(nullptr, bytes, nullptr, nullptr, nullptr, nullptr, n,
                                       key_bits(num_keys), nullptr));
  return bytes;
}

std::size_t align256(std::size_t b) {
  return (b + 255) / 256 * 256;
}

void plan_variant(const PlanArgs& a, const Workspace& ws) {
  const std::int64_t n = a.index.numel(), m = a.num_targets;
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  IndexPlan& p = *a.result;
  p.num_sources = n;
  p.num_targets = m;
  p.device = a.index.device;
  // For the stream whose kernels write them (see Tensor::empty).
  p.order = Tensor::empty({n}, DType::i64, a.index.device, ws.stream);
  p.offsets = Tensor::empty({m + 1}, DType::i64, a.index.device, ws.stream);
  const SortLayout layout = sort_layout(n, m);
  DeviceScratch scratch(layout.scratch_bytes + 256, a.index.device, Stream{stream});
  const WaitOnUnwind wait_on_error(stream);
  auto* bad = scratch.take<unsigned long long>(1);
  const SortBuffers b = sort_buffers(scratch, layout);
  sort_index_vector(a.index, nullptr, 0, b, bad, stream);
  if (const std::int64_t i = first_bad_position(bad, stream); i >= 0)
    throw IndexOutOfRange(index_error_message(
        "make_index_plan", i, read_index_value(a.index, i * a.index.strides[0]), m));
  widen_kernel<<<blocks_for(n), kBlock, 0, stream>>>(b.vals_out, n, p.order.data<std::int64_t>());
  SAMEBITS_CUDA_CHECK_LAUNCH("widen order");
  widen_kernel<<<blocks_for(m + 1), kBlock, 0, stream>>>(b.offsets, m + 1,
                                                         p.offsets.data<std::int64_t>());
  SAMEBITS_CUDA_CHECK_LAUNCH("widen offsets");
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::string plan_why_not(const PlanArgs& a) {
  if (a.index.numel() >= std::numeric_limits<int>::max() ||
      a.num_targets >= std::numeric_limits<int>::max())
    return "more than 2^31 - 1 sources or targets";
  return "";
}

} // namespace

void* DeviceScratch::take_bytes(std::size_t bytes) {
  const std::size_t b = align256(std::max<std::size_t>(bytes, 1));
  const Workspace ws = buffer_.workspace();
  if (used_ + b > ws.bytes)
    throw Error("scatter: internal error: scratch buffer too small");
  void* p = static_cast<char*>(ws.data) + used_;
  used_ += b;
  return p;
}

SortLayout sort_layout(std::int64_t n, std::int64_t num_keys, bool allow_counting, bool carried) {
  SortLayout l;
  l.n = n;
  l.num_keys = num_keys;
  const IndexSort sort = allow_counting
                             ? choose_index_sort(n, num_keys, tuning<ScatterTuning>(), carried)
                             : IndexSort::radix;
  l.block =
      sort == IndexSort::block || sort == IndexSort::block16 || sort == IndexSort::block_count;
  l.block16 = sort == IndexSort::block16;
  l.block_count = sort == IndexSort::block_count;
  l.counting = sort == IndexSort::counting;
  const auto ints = [](std::int64_t count) {
    return align256(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(int));
  };
  if (l.block) { // no temporary storage: the block's sort works in shared memory
    l.temp_bytes = 0;
    l.scratch_bytes = ints(n) + ints(num_keys + 1);
  } else if (l.counting) {
    const std::int64_t cells = count_cells(n, num_keys);
    l.temp_bytes = std::max<std::size_t>(scan_temp_bytes(cells), 1);
    l.scratch_bytes = ints(n) + ints(num_keys + 1) + 2 * ints(cells) + align256(l.temp_bytes);
  } else {
    l.temp_bytes = std::max<std::size_t>(cub_temp_bytes(n, num_keys), 1);
    l.scratch_bytes = 4 * ints(n) + ints(num_keys + 1) + align256(l.temp_bytes);
  }
  return l;
}

namespace {

// The layout's sizes and which sort it is; no buffers yet.
SortBuffers sort_of(const SortLayout& l) {
  SortBuffers b;
  b.n = l.n;
  b.num_keys = l.num_keys;
  b.counting = l.counting;
  b.block = l.block;
  b.block16 = l.block16;
  b.block_count = l.block_count;
  return b;
}

} // namespace

SortBuffers block_sort_buffers(const SortLayout& l, int* vals_out, int* offsets) {
  if (!l.block)
    throw Error("scatter: internal error: given buffers for a sort other than a one-block sort");
  SortBuffers b = sort_of(l);
  b.vals_out = vals_out;
  b.offsets = offsets;
  return b;
}

SortBuffers sort_buffers(DeviceScratch& scratch, const SortLayout& l) {
  SortBuffers b = sort_of(l);
  if (l.block) {
    // vals_out and offsets only
  } else if (l.counting) {
    const std::int64_t cells = count_cells(l.n, l.num_keys);
    b.counts = scratch.take<int>(std::max<std::int64_t>(cells, 1));
    b.starts = scratch.take<int>(std::max<std::int64_t>(cells, 1));
  } else {
    b.keys_in = scratch.take<int>(l.n);
    b.vals_in = scratch.take<int>(l.n);
    b.keys_out = scratch.take<int>(l.n);
  }
  b.vals_out = scratch.take<int>(l.n);
  b.offsets = scratch.take<int>(l.num_keys + 1);
  b.temp_bytes = l.temp_bytes;
  b.temp = b.temp_bytes > 0 ? scratch.take_bytes(b.temp_bytes) : nullptr;
  return b;
}

void build_vector_keys(const TensorView& index, std::int64_t m, const void* values32,
                       std::int64_t vstride, const SortBuffers& b, unsigned long long* bad,
                       cudaStream_t stream) {
  const std::int64_t n = index.numel();
  if (n == 0)
    return;
  const auto* v = static_cast<const int*>(values32);
  on_index_type(index, [&](const auto* idx) {
    vector_keys_kernel<<<blocks_for(n), kBlock, 0, stream>>>(idx, index.strides[0], n, m, v,
                                                             vstride, b.keys_in, b.vals_in, bad);
  });
  SAMEBITS_CUDA_CHECK_LAUNCH("vector_keys_kernel");
}

void sort_pairs_and_offsets(const SortBuffers& b, cudaStream_t stream) {
  if (b.counting || b.block)
    throw Error("scatter: internal error: a counting or block sort layout given to the radix sort");
  if (b.n > 0) {
    std::size_t temp = b.temp_bytes;
    SAMEBITS_CUDA_CHECK(radix_sort_pairs(b.temp, temp, b.keys_in, b.keys_out, b.vals_in, b.vals_out,
                                         b.n, key_bits(b.num_keys), stream));
  }
  offsets_kernel<<<blocks_for(b.n / kOffsetsPerThread + 1), kBlock, 0, stream>>>(
      b.keys_out, b.n, b.num_keys, b.offsets);
  SAMEBITS_CUDA_CHECK_LAUNCH("offsets_kernel");
}

void sort_index_vector(const TensorView& index, const void* values32, std::int64_t vstride,
                       const SortBuffers& b, unsigned long long* bad, cudaStream_t stream,
                       KeptIndex kept) {
  const auto* v32 = static_cast<const int*>(values32);
  if (b.block16 && values32 != nullptr)
    throw Error("scatter: internal error: values to carry given to the 16-bit block sort");
  if (kept.on() && (!b.block || values32 != nullptr))
    throw Error("scatter: internal error: a kept index given to a sort other than the one-block "
                "sort of positions");
  if (b.block) { // writes *bad itself
    on_index_type(index, [&](const auto* idx) {
      block_sort(idx, index.strides[0], v32, vstride, b, bad, stream, kept);
    });
    return;
  }
  if (bad != nullptr)
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
  if (!b.counting) {
    build_vector_keys(index, b.num_keys, values32, vstride, b, bad, stream);
    sort_pairs_and_offsets(b, stream);
    return;
  }
  on_index_type(index, [&](const auto* idx) {
    counting_sort(idx, index.strides[0], v32, vstride, b, bad, stream);
  });
}

std::int64_t first_bad_position(const unsigned long long* bad, cudaStream_t stream) {
  unsigned long long h = 0;
  SAMEBITS_CUDA_CHECK(cudaMemcpyAsync(&h, bad, sizeof h, cudaMemcpyDeviceToHost, stream));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h == ~0ull ? -1 : static_cast<std::int64_t>(h);
}

void register_cuda_index_plan(Registry& r) {
  r.add(Variant<PlanArgs>{
      {"make_index_plan", "cuda.stable_sort", DeviceType::cuda, Determinism::portable,
       "stable sort of (index, position) pairs + CSR offsets (one block's counting sort up to "
       "16384 "
       "positions into 2944 targets, one block's radix sort up to 11264 positions, or "
       "16384 into at most 65535 targets, a counting sort up to 1536 targets, CUB's radix sort "
       "beyond): one possible result"},
      plan_why_not,
      nullptr,
      plan_variant});
}

} // namespace samebits::detail

// The cuda.tile_partials variant of index_add and scatter_add (run_to_run): rows of at least 8
// features summed into few targets with a fresh index on every call, without a global sort. The
// order is defined in ops/tile_partials.hpp; three kernels:
//
//   tile_sort_kernel      a block per tile of 4096 rows: indices checked (the first bad position
//                         kept), rows put in stable order of target (CUB's block radix sort over
//                         the target's bits only); per tile the words target << 16 | row in tile
//   tile_partials_kernel  a block per (chunk of tiles, slice of 8 features): the chunk's sums per
//                         target in shared memory. The sorted rows are staged 1024 at a time, the
//                         next ones loaded while the current ones are summed; a lane group sums the
//                         runs of one target within its 32 ranks, a run crossing groups is finished
//                         by the group where it starts. Writes partial[chunk][target][feature].
//   tile_combine_kernel   out + partial(0) + partial(1) + ... per output element, nothing written
//                         when an index was bad
//
// Bytes: the source rows once (32-byte pieces), the index once, the partials twice (at most an
// eighth of the source by the chunking rule); no pass over (index, position) pairs in HBM beyond
// the sorted tiles' 4 bytes per row.
#include <cuda_pipeline.h>

#include <cub/block/block_exchange.cuh>
#include <cub/block/block_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <climits>
#include <string>

#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "cuda/scatter_shared.cuh"
#include "ops/tile_partials.hpp"

namespace samebits::detail {

namespace {

constexpr int kSortThreads = 256;
constexpr int kSortItems = static_cast<int>(kTileRows) / kSortThreads;  // 16 rows per thread
constexpr int kSumThreads = 256;
constexpr int kGroups = kSumThreads / kSliceFeatures;  // 32 lane groups of 8 lanes
constexpr int kItemsPerLane = kSubRows / kGroups;      // 32 staged rows per lane
static_assert(kGroups * kRunRows == kSubRows && kTileRows % kSubRows == 0);
// Shared-memory sums per block (M * 8 values) beside two staging buffers, within 227 KB.
template <class T> constexpr std::size_t kMaxSumsBytes = sizeof(T) == 4 ? 96 * 1024 : 64 * 1024;
constexpr std::int64_t kMinSources = 65536;            // below: the sort is cheap
constexpr int kTargetShift = 16;                       // sorted word: target << 16 | row in tile
constexpr unsigned kRowMask = (1u << kTargetShift) - 1;

using TileSort = cub::BlockRadixSort<unsigned, kSortThreads, kSortItems>;
using TileExchange = cub::BlockExchange<unsigned, kSortThreads, kSortItems>;

__global__ void __launch_bounds__(kSortThreads) tile_sort_kernel(const void* idx, bool is64, std::int64_t istride,
                                                                 std::int64_t L, std::int64_t M, int bits,
                                                                 unsigned* sorted, unsigned long long* bad) {
  __shared__ union {
    typename TileSort::TempStorage sort;
    typename TileExchange::TempStorage exchange;
  } tmp;
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * kTileRows;
  unsigned words[kSortItems];
  unsigned long long first_bad = ULLONG_MAX;
#pragma unroll
  for (int i = 0; i < kSortItems; ++i) {
    const int row = i * kSortThreads + static_cast<int>(threadIdx.x);  // striped: loads coalesce
    const std::int64_t pos = base + row;
    unsigned target = static_cast<unsigned>(M);  // past the end: sorted after every target
    if (pos < L) {
      const std::int64_t m = load_index(idx, is64, pos * istride);
      if (m >= 0 && m < M) target = static_cast<unsigned>(m);
      else if (static_cast<unsigned long long>(pos) < first_bad) first_bad = static_cast<unsigned long long>(pos);
    }
    words[i] = target << kTargetShift | static_cast<unsigned>(row);
  }
  if (first_bad != ULLONG_MAX) atomicMin(bad, first_bad);
  // Blocked (thread t holds rows 16t..16t+15) for a sort that is stable in row order; striped out,
  // so that the stores below coalesce.
  TileExchange(tmp.exchange).StripedToBlocked(words);
  __syncthreads();
  TileSort(tmp.sort).SortBlockedToStriped(words, kTargetShift, kTargetShift + bits);
  const std::int64_t rows = L - base < kTileRows ? L - base : kTileRows;
#pragma unroll
  for (int i = 0; i < kSortItems; ++i) {
    const int rank = i * kSortThreads + static_cast<int>(threadIdx.x);
    if (rank < rows) sorted[base + rank] = words[i];
  }
}

template <class T> struct TileSums {
  const T* src = nullptr;
  const unsigned* sorted = nullptr;
  T* partial = nullptr;  // [chunks][M][F]
  std::int64_t L = 0, M = 0, F = 0, src_row = 0, chunks = 0, chunk_tiles = 0;
  T alpha = T(1);
  bool scaled = false;
};

// Staged values: rank j of a sub-tile at (j + j / 32) * 8, so that the four lane groups of a warp,
// reading the same offset within their 32 ranks, fall in different shared-memory banks.
constexpr int kValsStride = (kSubRows + kSubRows / kRunRows) * kSliceFeatures;
__device__ __forceinline__ int value_slot(int j) { return (j + j / kRunRows) * kSliceFeatures; }

// Asynchronous copies of feature f of the 32 rows a lane group stages for a sub-tile (sorted words
// in `words`, tile starting at `tile_base`) into `vals`: all in flight together, no registers held.
// Every thread commits one copy group, empty or not, so that the wait below counts alike.
template <class T>
__device__ __forceinline__ void stage_values(const TileSums<T>& p, const unsigned* words, std::int64_t tile_base, int n,
                                             int group, int lane, std::int64_t f, T* vals) {
  if (f < p.F) {
#pragma unroll 8
    for (int k = 0; k < kItemsPerLane; ++k) {
      const int j = group + k * kGroups;
      if (j < n)
        __pipeline_memcpy_async(vals + value_slot(j) + lane, p.src + (tile_base + (words[j] & kRowMask)) * p.src_row + f,
                                sizeof(T));
    }
  }
  __pipeline_commit();
}

template <class T>
__global__ void __launch_bounds__(kSumThreads, sizeof(T) == 4 ? 2 : 1) tile_partials_kernel(TileSums<T> p) {
  extern __shared__ __align__(16) unsigned char tile_smem[];
  T* sums = reinterpret_cast<T*>(tile_smem);                             // [M][8]
  T* vals = sums + p.M * kSliceFeatures;                                 // two buffers of kValsStride
  auto* words = reinterpret_cast<unsigned*>(vals + 2 * kValsStride);    // two buffers of 1024 sorted words
  __shared__ T open_sum[kGroups][kSliceFeatures], cont_sum[kGroups][kSliceFeatures];
  __shared__ int open_target[kGroups];

  const int lane = static_cast<int>(threadIdx.x) % kSliceFeatures, group = static_cast<int>(threadIdx.x) / kSliceFeatures;
  const std::int64_t chunk = blockIdx.x % p.chunks, slice = blockIdx.x / p.chunks;
  const std::int64_t f = slice * kSliceFeatures + lane;
  for (std::int64_t i = threadIdx.x; i < p.M * kSliceFeatures; i += kSumThreads) sums[i] = -T(0);

  const std::int64_t begin = chunk * p.chunk_tiles * kTileRows;
  const std::int64_t end = std::min<std::int64_t>(p.L, (chunk + 1) * p.chunk_tiles * kTileRows);
  const auto rows_at = [&](std::int64_t sub) { return static_cast<int>(std::min<std::int64_t>(kSubRows, end - sub)); };
  const auto load_words = [&](std::int64_t sub, unsigned* w) {
    for (int j = static_cast<int>(threadIdx.x); j < rows_at(sub); j += kSumThreads) w[j] = __ldg(p.sorted + sub + j);
  };
  // Sub-tiles never cross a tile: chunks start at a tile and tiles hold 4 sub-tiles.
  if (begin < end) {
    load_words(begin, words);
    __syncthreads();
    stage_values(p, words, begin, rows_at(begin), group, lane, f, vals);
  }
  for (std::int64_t sub = begin, s = 0; sub < end; sub += kSubRows, ++s) {
    const int n = rows_at(sub);
    const unsigned* w = words + (s & 1) * kSubRows;
    const T* v = vals + (s & 1) * kValsStride;
    const std::int64_t next = sub + kSubRows;
    unsigned* w_next = words + ((s + 1) & 1) * kSubRows;
    if (next < end) load_words(next, w_next);
    if (lane == 0) open_target[group] = -1;
    __syncthreads();  // the next words are visible
    if (next < end) stage_values(p, w_next, next - next % kTileRows, rows_at(next), group, lane, f, vals + ((s + 1) & 1) * kValsStride);
    else __pipeline_commit();
    __pipeline_wait_prior(1);  // this sub-tile's copies have landed
    __syncthreads();           // everyone's
    const auto key = [&](int j) { return w[j] >> kTargetShift; };
    const auto value = [&](int j) { return contribution(v[value_slot(j) + lane], p.alpha, p.scaled); };

    // Runs within this group's ranks [lo, hi): a run that starts here and ends here goes into its
    // target's sum; one that continues from the previous group is kept as cont_sum, one that
    // continues into the next group as open_sum, finished below by this group.
    const int lo = group * kRunRows, hi = min(lo + kRunRows, n);
    if (lo < n) {
      unsigned cur = key(lo);
      int start = lo;
      T acc = value(lo);
      for (int j = lo + 1; j <= hi; ++j) {
        const unsigned k = j < hi ? key(j) : UINT_MAX;
        if (k == cur) {
          acc = acc + value(j);
          continue;
        }
        if (start == lo && lo > 0 && key(lo - 1) == cur) {
          cont_sum[group][lane] = acc;
        } else if (j == hi && hi < n && key(hi) == cur) {
          open_sum[group][lane] = acc;
          if (lane == 0) open_target[group] = static_cast<int>(cur);
        } else {
          T& t = sums[cur * kSliceFeatures + lane];
          t = t + acc;
        }
        if (j < hi) {
          cur = k;
          start = j;
          acc = value(j);
        }
      }
    }
    __syncthreads();
    if (const int t = open_target[group]; t >= 0) {
      T acc = open_sum[group][lane];
      for (int h = group + 1;; ++h) {
        acc = acc + cont_sum[h][lane];
        const int h_end = min(h * kRunRows + kRunRows, n);
        if (h_end >= n || key(h_end) != static_cast<unsigned>(t)) break;
      }
      T& sum = sums[t * kSliceFeatures + lane];
      sum = sum + acc;
    }
    __syncthreads();  // this sub-tile's buffers and run sums are free again
  }
  if (f < p.F)
    for (std::int64_t t = group; t < p.M; t += kGroups)
      p.partial[(chunk * p.M + t) * p.F + f] = sums[t * kSliceFeatures + lane];
}

template <class T> __device__ __forceinline__ bool is_negative_zero(T v) {
  if constexpr (sizeof(T) == 4) return __float_as_uint(v) == 0x80000000u;
  else return static_cast<unsigned long long>(__double_as_longlong(v)) == 0x8000000000000000ull;
}

template <class T>
__global__ void tile_combine_kernel(const T* partial, std::int64_t chunks, std::int64_t M, std::int64_t F, T* out,
                                    std::int64_t out_row, const unsigned long long* bad) {
  if (*bad != ULLONG_MAX) return;  // a bad index: nothing written (the host throws)
  const std::int64_t n = M * F;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = e / F, f = e - t * F;
    T& o = out[t * out_row + f];
    T acc = o;
    bool touched = false;
#pragma unroll 8
    for (std::int64_t c = 0; c < chunks; ++c) {
      const T q = partial[c * n + e];
      touched |= !is_negative_zero(q);
      acc = acc + q;
    }
    if (touched) o = acc;
  }
}

template <class T> void run_tiles(const ScatterArgs& a, cudaStream_t stream) {
  const Rows rw = rows_of(a);
  if (!rw.ok) {
    // Features not contiguous: sum into contiguous copies, then copy the result back.
    Tensor src = Tensor::copy_of(a.src), out = Tensor::copy_of(a.out);
    ScatterArgs c = a;
    c.src = src.view();
    c.out = out.view();
    run_tiles<T>(c, stream);
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));  // copy() runs on the default stream
    copy(out.view(), a.out);
    return;
  }
  const std::int64_t L = rw.L, M = rw.M, F = rw.F;
  if (L == 0 || F == 0) return;
  const std::int64_t tiles = (L + kTileRows - 1) / kTileRows, chunk_tiles = tile_chunk_tiles(L, M, F);
  const std::int64_t chunks = (tiles + chunk_tiles - 1) / chunk_tiles;
  const std::int64_t slices = (F + kSliceFeatures - 1) / kSliceFeatures;
  const std::size_t partial_bytes = static_cast<std::size_t>(chunks * M * F) * sizeof(T);
  DeviceScratch scratch(3 * 256 + static_cast<std::size_t>(L) * 4 + partial_bytes, a.out.device);
  const WaitOnUnwind wait_on_error(stream);
  auto* bad = scratch.take<unsigned long long>(1);
  auto* sorted = scratch.take<unsigned>(L);
  auto* partial = scratch.take<T>(chunks * M * F);
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));

  const TensorView vec = index_vector(a);
  const int bits = std::bit_width(static_cast<std::uint64_t>(M));  // M itself marks rows past the end
  tile_sort_kernel<<<static_cast<unsigned>(tiles), kSortThreads, 0, stream>>>(
      vec.data, vec.dtype == DType::i64, vec.strides[0], L, M, bits, sorted, bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("tile_sort_kernel");

  TileSums<T> p;
  p.src = static_cast<const T*>(a.src.data);
  p.sorted = sorted;
  p.partial = partial;
  p.L = L;
  p.M = M;
  p.F = F;
  p.src_row = rw.src_row;
  p.chunks = chunks;
  p.chunk_tiles = chunk_tiles;
  p.alpha = static_cast<T>(a.alpha);
  p.scaled = a.alpha != 1.0;
  const std::size_t smem = (static_cast<std::size_t>(M) * kSliceFeatures + 2 * kValsStride) * sizeof(T) + 2 * kSubRows * 4;
  SAMEBITS_CUDA_CHECK(cudaFuncSetAttribute(tile_partials_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
  tile_partials_kernel<T><<<static_cast<unsigned>(chunks * slices), kSumThreads, smem, stream>>>(p);
  SAMEBITS_CUDA_CHECK_LAUNCH("tile_partials_kernel");

  const int block = 256;
  tile_combine_kernel<T><<<std::min<unsigned>(grid_for(M * F, block), 1u << 20), block, 0, stream>>>(
      partial, chunks, M, F, static_cast<T*>(a.out.data), rw.out_row, bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("tile_combine_kernel");
  if (const std::int64_t i = first_bad_position(bad, stream); i >= 0)  // waits for the stream
    throw_bad_index(a, i, vector_geo(a, geo4(a)));
}

// Decided from the logical shapes and dtype, never from strides or the device: a call takes the
// same variant, and so the same bits, on every GPU.
std::string tiles_why_not(const ScatterArgs& a) {
  if (a.reduce != Reduce::sum || !a.include_self || a.plan != nullptr) return "sums including out only";
  bool vector_index = a.dim == 0;
  for (int j = 1; j < a.index.ndim && vector_index; ++j)
    vector_index = a.index.size(j) == 1 || a.index.stride(j) == 0;
  if (!vector_index) return "an index with one value per row along dim 0 only";
  const std::int64_t rows = a.src.ndim > 0 ? a.src.size(0) : 0;
  if (rows < kMinSources) return "fewer than 65536 source rows (the sort and pull is cheap there)";
  if (a.src.numel() / rows < kSliceFeatures) return "rows of fewer than 8 features";
  const std::size_t per_target = kSliceFeatures * size_of(a.src.dtype);
  const std::size_t most = a.src.dtype == DType::f32 ? kMaxSumsBytes<float> : kMaxSumsBytes<double>;
  if (static_cast<std::size_t>(a.out.size(0)) * per_target > most)
    return "more than " + std::to_string(most / per_target) + " targets (its sums live in shared memory)";
  return "";
}

template <class T> void run_tiles_on(const ScatterArgs& a, const Workspace& ws) { run_tiles<T>(a, SAMEBITS_STREAM(ws.stream)); }

void run_tile_partials(const ScatterArgs& a, const Workspace& ws) {
  if (a.src.dtype == DType::f32) run_tiles_on<float>(a, ws);
  else run_tiles_on<double>(a, ws);
}

}  // namespace

Variant<ScatterArgs> tile_partials_variant(const char* op) {
  const char* how =
      "rows put in order of target per tile of 4096 in shared memory, per-chunk sums per target in "
      "shared memory, chunks added in order; no global sort (rows of >= 8 features, >= 65536 rows, "
      "at most 3072 float32 or 1024 float64 targets; otherwise the sort)";
  return {{op, "cuda.tile_partials", DeviceType::cuda, Determinism::run_to_run, how}, tiles_why_not, nullptr,
          run_tile_partials};
}

}  // namespace samebits::detail

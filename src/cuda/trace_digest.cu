// trace::digest_on_device: the sum64 hash and the statistics of a contiguous CUDA tensor in one
// launch, written into a DeviceDigest in device memory (samebits.torch.trace records every op's
// output this way on CUDA: one call and one launch where torch's ops took a dozen of each).
//
// Every block adds its words' hash terms into record->hash_acc (integer sums modulo 2^64: any
// order gives the same value). Blocks 0 .. S-1 also take the statistics of consecutive chunks of
// the sampled elements (every stride-th one), each folded in a fixed order (a thread's elements in
// turn, then a fixed tree over the block's threads) into that block's partials. The last block to
// finish (a ticket) combines the partials in block order, reads the samples, writes the result and
// zeroes the working words, so the record is ready for the next digest.
#include "core/memory.hpp"
#include "core/strided.hpp"
#include "core/sum_hash_terms.hpp"
#include "core/trace_device.hpp"
#include "cuda/check.cuh"
#include "samebits/half.hpp"

#include <algorithm>
#include <cmath>
#include <cuda_runtime.h>

namespace samebits::detail {

namespace {

constexpr int kDigestThreads = 256;
constexpr std::int64_t kWordsPerThread = 8;     // hash words a thread takes before the grid grows
constexpr std::int64_t kMaxDigestBlocks = 1024; // then a grid-stride loop
constexpr std::int64_t kStatsPerBlock = 2048; // sampled elements per statistics block (8 a thread)
static_assert(kDigestThreads * 8 == kStatsPerBlock);
static_assert(trace::kDigestStatBlocks * kStatsPerBlock >= 65536, "the trace's 2^16 statistics");

// Word i of the bytes, the last one padded with zero bytes (the definition in samebits/trace.hpp).
__device__ __forceinline__ std::uint64_t word_at(const unsigned char* bytes, std::uint64_t nbytes,
                                                 bool aligned, std::uint64_t i) {
  if (aligned && 8 * i + 8 <= nbytes)
    return reinterpret_cast<const std::uint64_t*>(bytes)[i];
  std::uint64_t w = 0;
  for (std::uint64_t k = 0; k < 8 && 8 * i + k < nbytes; ++k)
    w |= static_cast<std::uint64_t>(bytes[8 * i + k]) << (8 * k);
  return w;
}

template <class T> __device__ __forceinline__ double as_double(T v) {
  if constexpr (is_half_v<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

struct Moments {
  double lo, hi, sum, sq;
  long long nan;
};

// The moments of no values: combine(empty_moments(), m) == m.
__device__ __forceinline__ Moments empty_moments() {
  return {HUGE_VAL, -HUGE_VAL, 0.0, 0.0, 0};
}

__device__ __forceinline__ Moments combine(Moments a, const Moments& b) {
  a.lo = fmin(a.lo, b.lo);
  a.hi = fmax(a.hi, b.hi);
  a.sum += b.sum;
  a.sq += b.sq;
  a.nan += b.nan;
  return a;
}

// The block's moments in a fixed tree: lanes by shuffles (offsets 16, 8, .. 1), then the warps'
// results in warp order by thread 0. Only thread 0's result is the block's.
__device__ Moments block_moments(Moments m) {
  __shared__ Moments warps[kDigestThreads / 32];
  for (int off = 16; off > 0; off /= 2) {
    Moments o;
    o.lo = __shfl_down_sync(0xffffffffu, m.lo, off);
    o.hi = __shfl_down_sync(0xffffffffu, m.hi, off);
    o.sum = __shfl_down_sync(0xffffffffu, m.sum, off);
    o.sq = __shfl_down_sync(0xffffffffu, m.sq, off);
    o.nan = __shfl_down_sync(0xffffffffu, m.nan, off);
    m = combine(m, o);
  }
  if ((threadIdx.x & 31) == 0)
    warps[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kDigestThreads / 32; ++w)
      m = combine(m, warps[w]);
  return m;
}

__device__ std::uint64_t block_sum(std::uint64_t h) {
  __shared__ std::uint64_t warps[kDigestThreads / 32];
  for (int off = 16; off > 0; off /= 2)
    h += __shfl_down_sync(0xffffffffu, h, off);
  if ((threadIdx.x & 31) == 0)
    warps[threadIdx.x / 32] = h;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kDigestThreads / 32; ++w)
      h += warps[w];
  return h;
}

template <class T>
__global__ void __launch_bounds__(kDigestThreads)
    digest_kernel(const unsigned char* bytes, std::uint64_t nbytes, std::int64_t n,
                  std::int64_t stride, std::int64_t count, int stat_blocks,
                  trace::DeviceDigest* rec) {
  const auto* values = reinterpret_cast<const T*>(bytes);
  // (1) the hash terms of this block's words
  const std::uint64_t words = (nbytes + 7) / 8;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(bytes) & 7u) == 0;
  std::uint64_t h = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * kDigestThreads + threadIdx.x; i < words;
       i += std::uint64_t{gridDim.x} * kDigestThreads) {
    const std::uint64_t m = trace::detail::column_multiplier(i % trace::detail::kSumHashRow) *
                            trace::detail::row_multiplier(i / trace::detail::kSumHashRow);
    h += (word_at(bytes, nbytes, aligned, i) ^ m) * m;
  }
  h = block_sum(h);
  if (threadIdx.x == 0 && h != 0)
    atomicAdd(reinterpret_cast<unsigned long long*>(&rec->hash_acc),
              static_cast<unsigned long long>(h));
  // (2) the statistics of this block's chunk of the sampled elements
  const int b = static_cast<int>(blockIdx.x);
  if (b < stat_blocks) {
    Moments m = empty_moments();
    const std::int64_t chunk = (count + stat_blocks - 1) / stat_blocks;
    const std::int64_t j1 = std::min(count, (b + 1) * chunk);
    for (std::int64_t j = b * chunk + threadIdx.x; j < j1; j += kDigestThreads) {
      const double v = as_double(values[j * stride]);
      if (isnan(v)) {
        ++m.nan;
        continue;
      }
      m.lo = fmin(m.lo, v);
      m.hi = fmax(m.hi, v);
      m.sum += v;
      m.sq += v * v;
    }
    m = block_moments(m);
    if (threadIdx.x == 0) {
      rec->part_min[b] = m.lo;
      rec->part_max[b] = m.hi;
      rec->part_sum[b] = m.sum;
      rec->part_sq[b] = m.sq;
      rec->part_nan[b] = m.nan;
    }
  }
  // (3) the last block to finish writes the result and zeroes the working words
  __shared__ bool last;
  __threadfence();
  if (threadIdx.x == 0)
    last = atomicAdd(reinterpret_cast<unsigned long long*>(&rec->ticket), 1ull) + 1 == gridDim.x;
  __syncthreads();
  if (!last)
    return;
  __threadfence();
  const int k = static_cast<int>(std::min<std::int64_t>(trace::kSamples, n));
  if (stat_blocks > 0 && static_cast<int>(threadIdx.x) < k)
    rec->samples[threadIdx.x] = as_double(values[threadIdx.x * n / k]);
  if (threadIdx.x != 0)
    return;
  rec->sum_hash = atomicExch(reinterpret_cast<unsigned long long*>(&rec->hash_acc), 0ull);
  rec->ticket = 0;
  Moments m = empty_moments();
  for (int s = 0; s < stat_blocks; ++s) {
    const volatile trace::DeviceDigest* v = rec;
    m = combine(
        m, Moments{v->part_min[s], v->part_max[s], v->part_sum[s], v->part_sq[s], v->part_nan[s]});
    rec->part_min[s] = rec->part_max[s] = rec->part_sum[s] = rec->part_sq[s] = 0;
    rec->part_nan[s] = 0;
  }
  const bool any_nan = m.nan > 0, stats = stat_blocks > 0;
  const double nan = __longlong_as_double(0x7ff8000000000000LL);
  rec->min = !stats ? 0.0 : any_nan ? nan : m.lo;
  rec->max = !stats ? 0.0 : any_nan ? nan : m.hi;
  rec->sum = !stats ? 0.0 : any_nan ? nan : m.sum;
  rec->l2 = !stats ? 0.0 : any_nan ? nan : sqrt(m.sq);
  rec->nan_count = m.nan;
  rec->stride = stride;
  rec->samples_taken = stats ? k : 0;
}

} // namespace

void cuda_trace_digest(const TensorView& t, std::int64_t stats_elements,
                       trace::DeviceDigest* record, Stream stream) {
  const CurrentDevice on_device(t.device);
  const std::int64_t n = t.numel();
  const auto nbytes = static_cast<std::uint64_t>(n) * size_of(t.dtype);
  const std::int64_t words = static_cast<std::int64_t>((nbytes + 7) / 8);
  std::int64_t stride = 1, count = 0;
  if (stats_elements > 0 && n > 0) {
    stride = (n + stats_elements - 1) / stats_elements;
    count = (n + stride - 1) / stride;
  }
  const auto stat_blocks = static_cast<int>(std::min<std::int64_t>(
      trace::kDigestStatBlocks, (count + kStatsPerBlock - 1) / kStatsPerBlock));
  const std::int64_t hash_blocks =
      std::min(kMaxDigestBlocks,
               (words + kDigestThreads * kWordsPerThread - 1) / (kDigestThreads * kWordsPerThread));
  const auto blocks = static_cast<unsigned>(std::max<std::int64_t>({hash_blocks, stat_blocks, 1}));
  visit_dtype(t.dtype, [&]<class T>() {
    digest_kernel<T><<<blocks, kDigestThreads, 0, SAMEBITS_STREAM(stream)>>>(
        static_cast<const unsigned char*>(t.data), nbytes, n, stride, count, stat_blocks, record);
    SAMEBITS_CUDA_CHECK_LAUNCH("digest_kernel");
  });
}

} // namespace samebits::detail

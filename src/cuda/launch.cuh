// Launch plumbing shared by the CUDA op families: checked launches that name the kernel, grid
// sizing, the launch-configuration override that tests use (SAMEBITS_CUDA_BLOCK /
// SAMEBITS_CUDA_GRID), a device guard, workspace carving, strided index decomposition and
// strided copies.
#pragma once
#include "cuda/check.cuh"
#include "cuda/vec16.cuh"
#include "samebits/tensor.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace samebits::detail {

// --- checked launches --------------------------------------------------------------------------

// Throws CudaError naming `what` (the kernel) if the last launch failed to start.
inline void check_launch(const char* what, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw_cuda_error(e, (std::string("launch of ") + what).c_str(), file, line);
}
#define SAMEBITS_CUDA_LAUNCHED(what) ::samebits::detail::check_launch(what, __FILE__, __LINE__)

// --- launch configuration ------------------------------------------------------------------------

// A launch configuration forced from the environment, so that tests can run the same op under
// several block and grid sizes and check that deterministic results do not change:
//   SAMEBITS_CUDA_BLOCK=N  threads per block (each kernel clamps it to the range it supports)
//   SAMEBITS_CUDA_GRID=N   at most N blocks (kernels loop over the remaining work)
// Zero means "not set": the kernel's own choice. Read at every launch, so a test may change it
// between calls.
struct LaunchOverride {
  int block = 0;
  long long grid = 0;
};

inline long long env_positive(const char* name) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0')
    return 0;
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v <= 0)
    throw InvalidArgument(std::string(name) + "='" + s + "': expected a positive integer or unset");
  return v;
}

inline LaunchOverride launch_override() {
  LaunchOverride o;
  o.block = static_cast<int>(std::min<long long>(env_positive("SAMEBITS_CUDA_BLOCK"), 1024));
  o.grid = env_positive("SAMEBITS_CUDA_GRID");
  return o;
}

constexpr std::int64_t kMaxGridX = 2147483647; // gridDim.x limit

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Blocks for `work_blocks` blocks' worth of work, at most `cap` (and the hardware limit), at
// least 1. Kernels launched with fewer blocks than work loop (grid-stride) over the rest.
inline unsigned grid_size(std::int64_t work_blocks, std::int64_t cap = kMaxGridX) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(std::min(work_blocks, cap), 1, kMaxGridX));
}

// Streaming multiprocessors of the current device.
inline int sm_count() {
  int dev = 0, n = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&dev));
  SAMEBITS_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

// Blocks of `kernel` that fit on the whole device at once: the grid of a persistent kernel.
// Cached per (device, kernel, block, smem): the occupancy query costs microseconds per call.
template <class Kernel>
std::int64_t resident_blocks(Kernel kernel, int block, std::size_t smem = 0) {
  int dev = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&dev));
  using Key = std::tuple<int, const void*, int, std::size_t>;
  static std::mutex mutex;
  static std::map<Key, std::int64_t> cache;
  const Key key{dev, reinterpret_cast<const void*>(kernel), block, smem};
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  int per_sm = 0;
  SAMEBITS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, smem));
  const std::int64_t n = static_cast<std::int64_t>(std::max(per_sm, 1)) * sm_count();
  cache.emplace(key, n);
  return n;
}

// V consecutive values of T loaded or stored as one access (16 bytes when V * sizeof(T) == 16);
// the address must be aligned to the pack's size.
template <class T, int V> struct alignas(sizeof(T) * V) Pack { T v[V]; };

// About the threads an H200 holds at once (132 SMs x 2048): kernels that pick a path by "few" or
// "many" threads compare against this constant, never against the device they run on, so a shape
// takes the same path on every GPU.
constexpr std::int64_t kOneWave = std::int64_t{1} << 18;

// Lanes per group: the smallest power of two >= n, at most `most` (a power of two).
inline int pow2_lanes(std::int64_t n, int most) {
  int g = 1;
  while (g < most && g < n)
    g *= 2;
  return g;
}

// Source rows whose loads a lane group issues before its steps, on the many-targets pulls of the
// scatter and segment families. Fewer rows hold fewer registers, so more groups are resident
// (the 16 / 8 / 4 rows measured: docs/decisions.md, scatter pulls and segment reductions; the
// current figures: bench/BASELINE.md, the scatter plan-reused and segment_reduce sum rows):
// 4 for short chains, 8 from 64 sources per
// target on average. SAMEBITS_CUDA_PULL_BATCH=4, 8 or 16 forces one (benchmarks, tests); the
// bits are the same.
inline int pull_batch(std::int64_t sources, std::int64_t targets) {
  if (const char* e = std::getenv("SAMEBITS_CUDA_PULL_BATCH"); e != nullptr && *e != '\0') {
    const int b = std::atoi(e);
    if (b == 4 || b == 8 || b == 16)
      return b;
  }
  return sources >= 64 * targets ? 8 : 4;
}

// --- workspace carving ---------------------------------------------------------------------------

// Sub-buffers of one workspace, each 256-byte aligned. workspace_bytes() and run() build the
// same layout from the same arguments, so the offsets agree.
class WorkspaceLayout {
public:
  std::size_t add(std::size_t bytes) {
    const std::size_t at = total_;
    total_ += (bytes + 255) / 256 * 256;
    return at;
  }
  std::size_t total() const { return total_; }

private:
  std::size_t total_ = 0;
};

// --- strided indexing ----------------------------------------------------------------------------

// Maps a row-major linear index over `size` to an element offset through `stride` (elements).
struct StridedIndex {
  int ndim = 0;
  std::int64_t size[kMaxDims] = {};
  std::int64_t stride[kMaxDims] = {};

  static StridedIndex of(const TensorView& v) {
    StridedIndex s;
    s.ndim = v.ndim;
    for (int d = 0; d < v.ndim; ++d) {
      s.size[d] = v.shape[static_cast<std::size_t>(d)];
      s.stride[d] = v.strides[static_cast<std::size_t>(d)];
    }
    return s;
  }
  // `v` without dimension `dim` (the outer index of a reduction along `dim`).
  static StridedIndex without(const TensorView& v, int dim) {
    StridedIndex s;
    for (int d = 0; d < v.ndim; ++d) {
      if (d == dim)
        continue;
      s.size[s.ndim] = v.shape[static_cast<std::size_t>(d)];
      s.stride[s.ndim] = v.strides[static_cast<std::size_t>(d)];
      ++s.ndim;
    }
    return s;
  }
  // Unrolled over kMaxDims so that kernel parameters are indexed by constants (no stack copy).
  __host__ __device__ std::int64_t offset(std::int64_t i) const {
    std::int64_t off = 0;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d >= ndim)
        continue;
      const std::int64_t q = i / size[d];
      off += (i - q * size[d]) * stride[d];
      i = q;
    }
    return off;
  }
};

// --- strided copies
// --------------------------------------------------------------------------------

// dst[i or dst_index.offset(i)] = src[src_index.offset(i)] for i < n, in row-major order. Word is
// an unsigned integer of the element's size, so one kernel serves every dtype of that size.
template <class Word, bool ContiguousDst>
__global__ void copy_strided_kernel(const Word* __restrict__ src, StridedIndex src_index,
                                    Word* __restrict__ dst, StridedIndex dst_index,
                                    std::int64_t n) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    dst[ContiguousDst ? i : dst_index.offset(i)] = src[src_index.offset(i)];
}

// Copies the elements of `src` (a CUDA view of any strides) to `dst`, laid out as `dst_layout`
// (same sizes) or contiguous row-major when it is null, on `stream`.
template <class Word>
void copy_strided(const TensorView& src, void* dst, const TensorView* dst_layout,
                  cudaStream_t stream) {
  static_assert(sizeof(Word) == 2 || sizeof(Word) == 4 || sizeof(Word) == 8);
  const std::int64_t n = src.numel();
  if (n == 0)
    return;
  constexpr int kBlock = 256;
  const unsigned grid = grid_size(ceil_div(n, kBlock), 65536);
  const auto* from = static_cast<const Word*>(src.data);
  auto* to = static_cast<Word*>(dst);
  if (dst_layout == nullptr)
    copy_strided_kernel<Word, true>
        <<<grid, kBlock, 0, stream>>>(from, StridedIndex::of(src), to, {}, n);
  else
    copy_strided_kernel<Word, false><<<grid, kBlock, 0, stream>>>(from, StridedIndex::of(src), to,
                                                                  StridedIndex::of(*dst_layout), n);
  SAMEBITS_CUDA_LAUNCHED("copy_strided_kernel");
}

// Writes a contiguous copy of `src` (a CUDA view of any strides) to `dst`, on `stream`.
template <class Word>
void gather_contiguous(const TensorView& src, void* dst, cudaStream_t stream) {
  copy_strided<Word>(src, dst, nullptr, stream);
}

} // namespace samebits::detail

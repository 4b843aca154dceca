// Launch plumbing shared by the CUDA op families (launches are checked with
// SAMEBITS_CUDA_CHECK_LAUNCH, cuda/check.cuh): the device's resident blocks, 16-byte packs,
// workspace carving, strided index decomposition and strided copies. Grid sizing and the other
// launch arithmetic that the kernel-choice functions share are plain C++ in ops/launch_shape.hpp.
#pragma once
#include "cuda/check.cuh"
#include "cuda/vec16.cuh"
#include "ops/launch_shape.hpp"
#include "samebits/tensor.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace samebits::detail {

// --- launch configuration (grid sizing, lanes: ops/launch_shape.hpp) --------------------------

// Streaming multiprocessors of the current device.
inline int sm_count() {
  int dev = 0, n = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&dev));
  SAMEBITS_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

// The compute capability's major version of the current device.
inline int compute_major() {
  int dev = 0, v = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&dev));
  SAMEBITS_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, dev));
  return v;
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
  SAMEBITS_CUDA_CHECK_LAUNCH("copy_strided_kernel");
}

// Writes a contiguous copy of `src` (a CUDA view of any strides) to `dst`, on `stream`.
template <class Word>
void gather_contiguous(const TensorView& src, void* dst, cudaStream_t stream) {
  copy_strided<Word>(src, dst, nullptr, stream);
}

} // namespace samebits::detail

// Device memory for the CUDA backend: a caching allocator over plain cudaMalloc (freed blocks are
// kept per device and size class and reused), copies, and the device count.
#include "core/backends.hpp"
#include "core/memory.hpp"
#include "core/plan_cache.hpp"
#include "cuda/check.cuh"
#include "cuda/launch.cuh"

#include <cuda_runtime.h>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace samebits::detail {

namespace {

// Size classes: powers of two from 512 bytes up to 256 MiB, then multiples of 64 MiB, so that a
// large tensor wastes at most a quarter of its size (an 8.6 GB tensor takes 8.6 GB, not 16 GiB).
constexpr std::size_t kLargeStep = std::size_t{64} << 20;
std::size_t size_class(std::size_t bytes) {
  if (bytes > 4 * kLargeStep)
    return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
  std::size_t c = 512;
  while (c < bytes)
    c <<= 1;
  return c;
}

} // namespace

std::size_t cuda_allocation_bytes(std::size_t bytes) {
  return size_class(bytes == 0 ? 1 : bytes);
}

// Whether work queued on `stream` now goes into a CUDA graph being captured. Never asked of the
// legacy default stream, which cannot be captured (and asking it during another stream's capture
// would end that capture). A failed query counts as capturing.
bool cuda_stream_capturing(Stream stream) {
  if (stream.handle == nullptr)
    return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream.handle), &status) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

namespace {

struct Cache {
  std::mutex m;
  // (device, size class, stream) -> blocks freed on that stream
  std::map<std::tuple<int, std::size_t, void*>, std::vector<void*>> free_blocks;
  std::map<void*, std::size_t> sizes;
};

Cache& cache() {
  static auto* c = new Cache; // never destroyed: device memory outlives static destructors
  return *c;
}

// Gives the cached blocks whose (device, size class, stream) key `match` accepts back to CUDA.
// The caller holds k.m.
template <class Match> void free_cached_blocks(Cache& k, Match match) {
  for (auto it = k.free_blocks.begin(); it != k.free_blocks.end();) {
    if (!match(it->first)) {
      ++it;
      continue;
    }
    for (void* q : it->second) {
      cudaFree(q);
      k.sizes.erase(q);
    }
    it = k.free_blocks.erase(it);
  }
}

} // namespace

CurrentDevice::CurrentDevice(Device device) {
  if (!device.is_cuda())
    return;
  int current = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&current));
  if (current == device.index)
    return;
  SAMEBITS_CUDA_CHECK(cudaSetDevice(device.index));
  saved_ = current;
}
CurrentDevice::~CurrentDevice() {
  if (saved_ >= 0)
    cudaSetDevice(saved_);
}

int cuda_device_count() {
  static const int n = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      cudaGetLastError(); // clear the sticky "no device" error
      return 0;
    }
    return c;
  }();
  return n;
}

void* cuda_allocate(std::size_t bytes, int device, Stream stream) {
  if (device < 0 || device >= cuda_device_count())
    throw BackendUnavailable("CUDA device " + std::to_string(device) + " is not present (" +
                             std::to_string(cuda_device_count()) + " device(s) found)");
  const std::size_t c = size_class(bytes == 0 ? 1 : bytes);
  auto& k = cache();
  {
    std::lock_guard lock(k.m);
    auto& list = k.free_blocks[{device, c, stream.handle}];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
  }
  const CurrentDevice on_device(Device::cuda(device));
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, c);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    // Index copies and plans kept for automatic reuse go first (their blocks return to the free
    // lists, after a wait for the device), then every free block; then one more try.
    plan_cache().clear();
    {
      std::lock_guard lock(k.m);
      free_cached_blocks(k, [](const auto&) { return true; });
    }
    e = cudaMalloc(&p, c);
  }
  if (e != cudaSuccess) {
    cudaGetLastError(); // reported by the exception: not left for the next call's check to find
    throw_cuda_error(e, ("cudaMalloc(" + std::to_string(c) + " bytes)").c_str(), __FILE__,
                     __LINE__);
  }
  std::lock_guard lock(k.m);
  k.sizes[p] = c;
  return p;
}

void cuda_free(void* p, int device, Stream stream) {
  if (p == nullptr)
    return;
  const bool in_graph = cuda_stream_capturing(stream); // a failed query keeps the block
  auto& k = cache();
  std::lock_guard lock(k.m);
  auto it = k.sizes.find(p);
  if (it == k.sizes.end())
    return;
  if (in_graph) {
    // A block freed while its stream is captured into a CUDA graph belongs to the graph: every
    // replay uses it again, so it is never handed out again (nor freed: kept for the process).
    k.sizes.erase(it);
    return;
  }
  // No synchronization: the block is handed out again only to allocations on the same stream,
  // whose work is queued after whatever still uses it.
  k.free_blocks[{device, it->second, stream.handle}].push_back(p);
}

void cuda_release_stream(int device, Stream stream) {
  if (stream.handle == nullptr || device < 0 || device >= cuda_device_count())
    return;
  const CurrentDevice on_device(Device::cuda(device));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)));
  release_blas_handle(device, stream);
  // Plan entries whose buffers came from this stream: freed now, into its cache (freed below),
  // rather than later under a stream handle that no longer names a stream.
  plan_cache().forget_stream(device, reinterpret_cast<std::uintptr_t>(stream.handle));
  auto& k = cache();
  std::lock_guard lock(k.m);
  free_cached_blocks(k, [&](const auto& key) {
    return std::get<0>(key) == device && std::get<2>(key) == stream.handle;
  });
}

void cuda_copy(void* dst, Device dst_device, const void* src, Device src_device,
               std::size_t bytes) {
  const cudaMemcpyKind kind =
      dst_device.is_cuda()
          ? (src_device.is_cuda() ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
          : cudaMemcpyDeviceToHost;
  SAMEBITS_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
  // cudaMemcpy may return before a copy from pageable host memory, or between two device buffers,
  // has landed; work queued later on a non-blocking stream is not ordered after it. Wait, so that
  // the copy is done for every stream, as callers are promised.
  if (kind != cudaMemcpyDeviceToHost)
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void cuda_copy_strided(const TensorView& src, const TensorView& dst) {
  if (src.numel() == 0)
    return;
  const CurrentDevice on_device(dst.device);
  const std::size_t bytes = size_of(src.dtype);
  if (bytes != 2 && bytes != 4 && bytes != 8)
    throw InvalidArgument("cuda_copy_strided: elements of 2, 4 or 8 bytes only");
  if (bytes == 2) // bfloat16, float16
    copy_strided<std::uint16_t>(src, dst.data, &dst, nullptr);
  else if (bytes == 4)
    copy_strided<std::uint32_t>(src, dst.data, &dst, nullptr);
  else
    copy_strided<std::uint64_t>(src, dst.data, &dst, nullptr);
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void cuda_synchronize(Stream stream) {
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(SAMEBITS_STREAM(stream)));
}

void cuda_synchronize_device() {
  SAMEBITS_CUDA_CHECK(cudaDeviceSynchronize());
}

} // namespace samebits::detail

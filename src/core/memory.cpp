// Device-independent memory entry points; the CUDA work is delegated to the CUDA backend.
#include "core/memory.hpp"

#include "samebits/errors.hpp"
#include "samebits/samebits.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace samebits::detail {

void* allocate_bytes(std::size_t bytes, Device device, Stream stream) {
  if (device.is_cuda())
    return cuda_allocate(bytes, device.index, stream);
  // 64-byte alignment for vector loads; at least one byte so the pointer is never null.
  const std::size_t rounded = ((bytes == 0 ? 1 : bytes) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr)
    throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void free_bytes(void* p, Device device, Stream stream) {
  if (device.is_cuda())
    cuda_free(p, device.index, stream);
  else
    std::free(p);
}

} // namespace samebits::detail

namespace samebits {

void release_stream(Stream stream, Device device) {
  if (device.is_cuda() && stream.handle != nullptr)
    detail::cuda_release_stream(device.index, stream);
}

} // namespace samebits

namespace samebits::detail {

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes) {
  if (bytes == 0)
    return;
  if (dst_device.is_cpu() && src_device.is_cpu())
    std::memcpy(dst, src, bytes);
  else
    cuda_copy(dst, dst_device, src, src_device, bytes);
}

} // namespace samebits::detail

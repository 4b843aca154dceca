// Raw memory on any device: allocation (CUDA through a caching cudaMalloc allocator), copies and
// synchronization. The CUDA half lives in src/cuda/memory.cu (src/nocuda/ without CUDA).
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/dtype.hpp"
#include "samebits/tensor.hpp"

#include <cstddef>

namespace samebits::detail {

// CUDA blocks are cached per stream: a block freed on a stream is reused only by allocations on
// the same stream, which the stream's own ordering makes safe without synchronizing. So memory
// that kernels on a stream use must be allocated and freed for that stream (scratch inside an op:
// DeviceScratch or Tensor::empty with the op's stream), or be freed only once that work is done.
void* allocate_bytes(std::size_t bytes, Device device, Stream stream = {});
void free_bytes(void* p, Device device, Stream stream = {});
// Copies bytes between any two devices and waits for the copy to finish.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes);
void* cuda_allocate(std::size_t bytes, int device, Stream stream = {});
// Waits for `stream`, then frees the blocks cached for it on `device` and its cuBLAS handle.
void cuda_release_stream(int device, Stream stream);
// The cuBLAS half of that (src/cuda/gemm.cu): destroys the handle and frees the workspace.
void release_blas_handle(int device, Stream stream);
// The bytes a CUDA allocation of `bytes` really holds (its size class in the caching allocator).
std::size_t cuda_allocation_bytes(std::size_t bytes);
void cuda_free(void* p, int device, Stream stream = {});
// Whether work queued on `stream` now goes into a CUDA graph being captured (CUDA builds only).
bool cuda_stream_capturing(Stream stream);
void cuda_copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);
// Copies `src` into `dst` (same sizes and dtype, non-negative strides, both on one CUDA device,
// not overlapping, dst reaching each element once) with one kernel on the default stream, and
// waits for it.
void cuda_copy_strided(const TensorView& src, const TensorView& dst);
void cuda_synchronize(Stream stream);
// Waits for all work on the current CUDA device (every stream).
void cuda_synchronize_device();
// Throws the deferred index error of CUDA device `device` if one has reached the host
// (src/cuda/deferred_checks.cu; samebits/stream.hpp's CudaIndexChecks); never waits.
void cuda_raise_deferred_index_error(int device);

// Makes a CUDA device current for its lifetime and restores the caller's afterwards, so that an
// op's kernels, CUB calls and library handles run on the device of its tensors whatever device
// the calling thread had current. Does nothing for the CPU.
class CurrentDevice {
public:
  explicit CurrentDevice(Device device);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

private:
  int saved_ = -1; // the device to restore; -1: nothing was changed
};

} // namespace samebits::detail

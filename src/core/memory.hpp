// Raw memory on any device: allocation (CUDA through a caching cudaMalloc allocator), copies and
// synchronization. The CUDA half lives in src/cuda/memory.cu (src/nocuda/ without CUDA).
#pragma once
#include <cstddef>

#include "samebits/determinism.hpp"
#include "samebits/dtype.hpp"

namespace samebits::detail {

void* allocate_bytes(std::size_t bytes, Device device);
void free_bytes(void* p, Device device);
// Copies bytes between any two devices and waits for the copy to finish.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes);
void* cuda_allocate(std::size_t bytes, int device);
void cuda_free(void* p, int device);
void cuda_copy(void* dst, Device dst_device, const void* src, Device src_device,
               std::size_t bytes);
void cuda_synchronize(Stream stream);

}  // namespace samebits::detail

// Error checking for CUDA calls and launches: every failure becomes a CudaError that names the
// call, the file and line, and CUDA's own message.
#pragma once
#include "samebits/errors.hpp"
#include "samebits/tensor.hpp"

#include <cuda_runtime.h>
#include <string>

namespace samebits::detail {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line);

// For error messages: one element, at element offset `offset`, of an int32 or int64 tensor on the
// GPU (a synchronous copy).
std::int64_t read_index_value(const TensorView& index, std::int64_t offset);

} // namespace samebits::detail

#define SAMEBITS_CUDA_CHECK(call)                                                                  \
  do {                                                                                             \
    cudaError_t samebits_err_ = (call);                                                            \
    if (samebits_err_ != cudaSuccess)                                                              \
      ::samebits::detail::throw_cuda_error(samebits_err_, #call, __FILE__, __LINE__);              \
  } while (0)

// After a kernel launch: reports launch-configuration errors at once, naming the launch.
#define SAMEBITS_CUDA_CHECK_LAUNCH(what)                                                           \
  do {                                                                                             \
    cudaError_t samebits_err_ = cudaGetLastError();                                                \
    if (samebits_err_ != cudaSuccess)                                                              \
      ::samebits::detail::throw_cuda_error(samebits_err_, "launch of " what, __FILE__, __LINE__);  \
  } while (0)

// The cudaStream_t of an Options/Stream.
#define SAMEBITS_STREAM(s) (static_cast<cudaStream_t>((s).handle))

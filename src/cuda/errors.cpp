// CudaError construction (host code, outside nvcc: fmt's compile-time format strings need g++).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "cuda/check.cuh"

namespace samebits::detail {

void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line) {
  throw CudaError(fmt::format("CUDA call failed: {} at {}:{}: {} ({})", what, file, line,
                              cudaGetErrorString(e), cudaGetErrorName(e)));
}

}  // namespace samebits::detail

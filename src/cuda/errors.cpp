// CudaError construction (host code, outside nvcc: fmt's compile-time format strings need g++),
// and the read of an index value that error messages quote.
#include "cuda/check.cuh"

#include <cuda_runtime.h>
#include <fmt/format.h>

namespace samebits::detail {

void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line) {
  throw CudaError(fmt::format("CUDA call failed: {} at {}:{}: {} ({})", what, file, line,
                              cudaGetErrorString(e), cudaGetErrorName(e)));
}

std::int64_t read_index_value(const TensorView& index, std::int64_t offset) {
  if (index.dtype == DType::i32) {
    std::int32_t v = 0;
    SAMEBITS_CUDA_CHECK(cudaMemcpy(&v, static_cast<const std::int32_t*>(index.data) + offset,
                                   sizeof v, cudaMemcpyDeviceToHost));
    return v;
  }
  std::int64_t v = 0;
  SAMEBITS_CUDA_CHECK(cudaMemcpy(&v, static_cast<const std::int64_t*>(index.data) + offset,
                                 sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

} // namespace samebits::detail

// Random fills on CUDA devices: one thread per element (grid-stride), computing exactly what the
// CPU fill computes (src/core/random_detail.hpp), so both give the same bits.
#include "core/memory.hpp"
#include "core/random_detail.hpp"
#include "cuda/check.cuh"

#include <algorithm>
#include <cuda_runtime.h>

namespace samebits::detail {

namespace {

template <class T> __global__ void fill_random_kernel(T* out, std::int64_t n, RandomFill f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = random_value<T>(f, f.offset + static_cast<std::uint64_t>(i));
}

template <class T> void launch(const TensorView& out, const RandomFill& f) {
  const std::int64_t n = out.numel();
  constexpr int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((n + threads - 1) / threads, 65536);
  const CurrentDevice on_device(out.device);
  fill_random_kernel<T>
      <<<static_cast<unsigned>(blocks), threads>>>(static_cast<T*>(out.data), n, f);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t done = cudaDeviceSynchronize();
  SAMEBITS_CUDA_CHECK(launched);
  SAMEBITS_CUDA_CHECK(done);
}

} // namespace

void cuda_fill_random(const TensorView& out, const RandomFill& f) {
  if (out.numel() == 0)
    return;
  switch (out.dtype) {
  case DType::f32:
    launch<float>(out, f);
    break;
  case DType::f64:
    launch<double>(out, f);
    break;
  case DType::i32:
    launch<std::int32_t>(out, f);
    break;
  case DType::i64:
    launch<std::int64_t>(out, f);
    break;
  case DType::bf16:
    launch<bf16>(out, f);
    break;
  case DType::f16:
    launch<f16>(out, f);
    break;
  }
}

} // namespace samebits::detail

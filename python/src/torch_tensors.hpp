// What samebits._torch_mode's files share about torch tensors: samebits' dtype of a torch scalar
// type, and torch's current stream on a tensor's device.
#pragma once
#include "samebits/tensor.hpp"

#include <ATen/core/Tensor.h>
#if SAMEBITS_TORCH_MODE_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <optional>

namespace samebits::python {

inline std::optional<DType> dtype_of(at::ScalarType t) {
  switch (t) {
  case at::kFloat:
    return DType::f32;
  case at::kDouble:
    return DType::f64;
  case at::kInt:
    return DType::i32;
  case at::kLong:
    return DType::i64;
  case at::kBFloat16:
    return DType::bf16;
  case at::kHalf:
    return DType::f16;
  default:
    return std::nullopt;
  }
}

// torch's current stream on t's device (null on the CPU).
inline void* stream_of(const at::Tensor& t) {
#if SAMEBITS_TORCH_MODE_CUDA
  if (t.is_cuda())
    return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
#else
  (void)t;
#endif
  return nullptr;
}

} // namespace samebits::python

// Elementwise conversion between floating dtypes (float32, float64, bfloat16, float16), the
// CUDA half of it, and the float32 staging that ops use for bfloat16/float16 tensors.
#pragma once
#include "samebits/tensor.hpp"

namespace samebits::detail {

// src and dst contiguous, same numel, floating dtypes, both on dst's device (CPU or one CUDA
// device). On CUDA the kernel is queued on `stream` and not waited for.
void convert_contiguous(const TensorView& src, const TensorView& dst, Stream stream = {});
// The CUDA kernel behind it (src/cuda/half.cu; BackendUnavailable without CUDA).
void cuda_convert_contiguous(const TensorView& src, const TensorView& dst, Stream stream);

// A contiguous copy of `v` converted to `dtype` (floating), on v's device; exact from bfloat16 or
// float16 to float32/float64. Complete on return.
Tensor to_dtype(const TensorView& v, DType dtype, Stream stream = {});
inline Tensor to_float32(const TensorView& v, Stream stream = {}) {
  return to_dtype(v, DType::f32, stream);
}
// Rounds the values of `wide` (contiguous float32 or float64, dst's shape) into `dst` (any
// floating dtype and strides that copy() takes), once each, to nearest even. Complete on return.
void round_into(const TensorView& wide, const TensorView& dst, Stream stream = {});

} // namespace samebits::detail

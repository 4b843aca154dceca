// bfloat16/float16 calls of the ops that compute them in float32 through their float32 variants:
// exact float32 copies of the half inputs (and of an output that the op accumulates into), the
// float32 op on those, then one rounding of each float32 result into the caller's output. The
// float32 op computes its canonical order, so a half result is that order's float32 value rounded
// once to nearest even, on every backend alike (the conversions are samebits/half.hpp's).
#pragma once
#include "core/convert.hpp"
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits::detail {

// The float32 stand-in for a half output: its values when the op reads them (accumulates),
// else uninitialised float32 of its shape.
inline Tensor staged_output(const TensorView& out, bool accumulates, const Options& opts) {
  return accumulates ? to_float32(out, opts.stream)
                     : Tensor::empty(out.sizes(), DType::f32, out.device, opts.stream);
}

} // namespace samebits::detail

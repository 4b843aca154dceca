// A tensor's values on the host, in row-major order, for statistics and reports.
//
// Part of samebits/util/: support that the application library and the command-line program share
// with the kernels (public so that neither needs a src/ header); namespace detail, no stable API.
#pragma once
#include "samebits/half.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>
#include <vector>

namespace samebits::detail {

// Each value converted to V (double for statistics; int64 keeps integer tensors exact, where
// doubles would merge values above 2^53). Copies only what is not a contiguous CPU tensor.
template <class V> std::vector<V> host_values(const TensorView& t) {
  const bool copy = !t.device.is_cpu() || !t.is_contiguous();
  const Tensor hold = copy ? Tensor::copy_of(t, Device::cpu()) : Tensor{};
  const TensorView h = copy ? hold.view() : t;
  std::vector<V> v(static_cast<std::size_t>(h.numel()));
  auto convert = [&]<class T>() {
    const T* p = static_cast<const T*>(h.data);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<V>(p[i]);
  };
  switch (h.dtype) {
  case DType::f32:
    convert.template operator()<float>();
    break;
  case DType::f64:
    convert.template operator()<double>();
    break;
  case DType::i32:
    convert.template operator()<std::int32_t>();
    break;
  case DType::i64:
    convert.template operator()<std::int64_t>();
    break;
  case DType::bf16:
  case DType::f16: {
    // Each value widened exactly to float32, then to V.
    const auto* p = static_cast<const std::uint16_t*>(h.data);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<V>(h.dtype == DType::bf16 ? half_bits::float_from_bf16(p[i])
                                                   : half_bits::float_from_f16(p[i]));
    break;
  }
  }
  return v;
}

} // namespace samebits::detail

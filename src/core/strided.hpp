// Host helpers shared by CPU kernels and tools: dtype dispatch, strided element iteration, and
// (samebits/util/host_values.hpp) a tensor's values on the host.
#pragma once
#include "samebits/errors.hpp"
#include "samebits/tensor.hpp"
#include "samebits/util/host_values.hpp"

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace samebits::detail {

// Calls f.template operator()<T>() with T the C++ type of `t`.
template <class F> decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
  case DType::f32:
    return f.template operator()<float>();
  case DType::f64:
    return f.template operator()<double>();
  case DType::i32:
    return f.template operator()<std::int32_t>();
  case DType::i64:
    return f.template operator()<std::int64_t>();
  case DType::bf16:
    return f.template operator()<bf16>();
  case DType::f16:
    return f.template operator()<f16>();
  }
  throw InvalidArgument("unknown dtype");
}
// Same, for float32 and float64 only; other dtypes throw naming `op`.
template <class F> decltype(auto) visit_float(DType t, const char* op, F&& f) {
  if (t == DType::f32)
    return f.template operator()<float>();
  if (t == DType::f64)
    return f.template operator()<double>();
  throw InvalidArgument(std::string(op) + ": expected a float32 or float64 tensor, got " +
                        std::string(to_string(t)));
}

// Calls f(offset_in_a, offset_in_b) for every multi-index of `a`'s shape in row-major order;
// `b` must have the same shape (its strides may differ).
template <class F> void for_each_element(const TensorView& a, const TensorView& b, F&& f) {
  const std::int64_t n = a.numel();
  if (n == 0)
    return;
  if (a.ndim == 0) {
    f(0, 0);
    return;
  }
  std::array<std::int64_t, kMaxDims> idx{};
  std::int64_t oa = 0, ob = 0;
  const int last = a.ndim - 1;
  for (std::int64_t i = 0; i < n; ++i) {
    f(oa, ob);
    for (int d = last; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      if (++idx[du] < a.shape[du]) {
        oa += a.strides[du];
        ob += b.strides[du];
        break;
      }
      oa -= (a.shape[du] - 1) * a.strides[du];
      ob -= (b.shape[du] - 1) * b.strides[du];
      idx[du] = 0;
    }
  }
}

} // namespace samebits::detail

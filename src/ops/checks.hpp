// Argument checks shared by the public op entry points. Each throws InvalidArgument (or
// IndexOutOfRange) with the op's name before anything is written.
#pragma once
#include <fmt/format.h>

#include <initializer_list>
#include <string_view>

#include "samebits/errors.hpp"
#include "samebits/tensor.hpp"

namespace samebits::detail {

inline void check_same_device(std::string_view op, std::initializer_list<TensorView> ts) {
  const TensorView& first = *ts.begin();
  for (const auto& t : ts)
    if (!(t.device == first.device))
      throw InvalidArgument(fmt::format("{}: tensors are on different devices ({} and {}); move "
                                        "them to one device first",
                                        op, to_string(first.device), to_string(t.device)));
}

inline void check_float(std::string_view op, std::string_view name, const TensorView& t) {
  if (!is_floating(t.dtype))
    throw InvalidArgument(fmt::format("{}: {} must be float32 or float64, got {}", op, name, t.describe()));
}

inline void check_index_dtype(std::string_view op, std::string_view name, const TensorView& t) {
  if (!is_integer(t.dtype))
    throw InvalidArgument(fmt::format("{}: {} must be int32 or int64, got {}", op, name, t.describe()));
}

inline void check_same_dtype(std::string_view op, const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype)
    throw InvalidArgument(fmt::format("{}: dtypes differ: {} and {}", op, a.describe(), b.describe()));
}

inline void check_data(std::string_view op, std::string_view name, const TensorView& t) {
  if (t.data == nullptr && t.numel() > 0)
    throw InvalidArgument(fmt::format("{}: {} has no data pointer", op, name));
}

inline int normalize_dim(std::string_view op, int dim, int ndim) {
  const int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= std::max(ndim, 1))
    throw InvalidArgument(fmt::format("{}: dim {} is out of range for a {}-d tensor", op, dim, ndim));
  return d;
}

inline void check_shape(std::string_view op, std::string_view name, const TensorView& t,
                        const Shape& expected) {
  if (t.sizes() != expected) {
    std::string e;
    for (std::size_t i = 0; i < expected.size(); ++i) e += (i ? ", " : "") + std::to_string(expected[i]);
    throw InvalidArgument(fmt::format("{}: {} must have shape [{}], got {}", op, name, e, t.describe()));
  }
}

}  // namespace samebits::detail

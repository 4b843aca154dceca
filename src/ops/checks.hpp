// Argument checks shared by the public op entry points. Each throws InvalidArgument (or
// IndexOutOfRange) with the op's name before anything is written.
#pragma once
#include "core/overlap.hpp"
#include "core/strided.hpp"
#include "samebits/errors.hpp"
#include "samebits/tensor.hpp"

#include <fmt/format.h>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

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
  if (t.dtype != DType::f32 && t.dtype != DType::f64)
    throw InvalidArgument(
        fmt::format("{}: {} must be float32 or float64, got {}", op, name, t.describe()));
}
// For the ops that also take bfloat16 and float16 (computed in float32, see their headers).
inline void check_float_or_half(std::string_view op, std::string_view name, const TensorView& t) {
  if (!is_floating(t.dtype))
    throw InvalidArgument(fmt::format(
        "{}: {} must be float32, float64, bfloat16 or float16, got {}", op, name, t.describe()));
}

inline void check_index_dtype(std::string_view op, std::string_view name, const TensorView& t) {
  if (!is_integer(t.dtype))
    throw InvalidArgument(
        fmt::format("{}: {} must be int32 or int64, got {}", op, name, t.describe()));
}

inline void check_same_dtype(std::string_view op, const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype)
    throw InvalidArgument(
        fmt::format("{}: dtypes differ: {} and {}", op, a.describe(), b.describe()));
}

inline void check_data(std::string_view op, std::string_view name, const TensorView& t) {
  if (t.data == nullptr && t.numel() > 0)
    throw InvalidArgument(fmt::format("{}: {} has no data pointer", op, name));
}

// An output that reaches an element twice, or shares an element with an input, would have threads
// race on it (whatever the level promises) or read what the op already wrote: refused, naming
// what it overlaps. Inputs are (name, view) pairs; an accumulating op lists only its other inputs.
inline void check_output(std::string_view op, std::string_view name, const TensorView& out,
                         std::initializer_list<std::pair<std::string_view, TensorView>> inputs) {
  if (reaches_an_element_twice(out))
    throw InvalidArgument(fmt::format("{}: {} reaches some element twice ({}); write to a tensor "
                                      "whose elements are distinct",
                                      op, name, out.describe()));
  for (const auto& [input, view] : inputs)
    if (views_overlap(out, view))
      throw InvalidArgument(
          fmt::format("{}: {} shares memory with {}; write to a separate tensor", op, name, input));
}

// The first value of an integer index outside [0, hi), as (row-major position, value), read on
// the host (a copy where the index lives on a GPU); nothing when every value lies inside.
inline std::optional<std::pair<std::int64_t, std::int64_t>>
first_index_outside(const TensorView& index, std::int64_t hi) {
  if (index.numel() == 0)
    return std::nullopt;
  Tensor hold;
  if (!index.device.is_cpu())
    hold = Tensor::copy_of(index, Device::cpu());
  const TensorView h = index.device.is_cpu() ? index : hold.view();
  std::optional<std::pair<std::int64_t, std::int64_t>> bad;
  std::int64_t pos = 0;
  visit_dtype(h.dtype, [&]<class I>() {
    if constexpr (std::is_integral_v<I>) {
      const I* p = static_cast<const I*>(h.data);
      for_each_element(h, h, [&](std::int64_t o, std::int64_t) {
        if (const auto v = static_cast<std::int64_t>(p[o]); !bad && (v < 0 || v >= hi))
          bad = {{pos, v}};
        ++pos;
      });
    }
  });
  return bad;
}

inline int normalize_dim(std::string_view op, int dim, int ndim) {
  const int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= std::max(ndim, 1))
    throw InvalidArgument(
        fmt::format("{}: dim {} is out of range for a {}-d tensor", op, dim, ndim));
  return d;
}

inline void check_shape(std::string_view op, std::string_view name, const TensorView& t,
                        const Shape& expected) {
  if (t.sizes() != expected) {
    std::string e;
    for (std::size_t i = 0; i < expected.size(); ++i)
      e += (i ? ", " : "") + std::to_string(expected[i]);
    throw InvalidArgument(
        fmt::format("{}: {} must have shape [{}], got {}", op, name, e, t.describe()));
  }
}

} // namespace samebits::detail

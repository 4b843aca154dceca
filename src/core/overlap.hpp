// Whether views share bytes or reach an element twice: the checks that keep an op's output from
// racing with itself or with its inputs, and that tell copy() when it needs a snapshot.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include "samebits/errors.hpp"
#include "samebits/tensor.hpp"

namespace samebits::detail {

// The elements [0, end) a view spans from its data pointer (non-negative strides only; an empty
// view spans nothing).
inline std::int64_t element_span_end(const TensorView& v) {
  if (v.numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < v.ndim; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (v.strides[i] < 0) throw InvalidArgument("negative strides are not supported: " + v.describe());
    last += (v.shape[i] - 1) * v.strides[i];
  }
  return last + 1;
}

// Whether the bytes two views span intersect (same device assumed by the caller).
inline bool views_overlap(const TensorView& a, const TensorView& b) {
  if (a.numel() == 0 || b.numel() == 0 || !(a.device == b.device)) return false;
  const auto* pa = static_cast<const char*>(a.data);
  const auto* pb = static_cast<const char*>(b.data);
  const auto* ea = pa + element_span_end(a) * static_cast<std::int64_t>(size_of(a.dtype));
  const auto* eb = pb + element_span_end(b) * static_cast<std::int64_t>(size_of(b.dtype));
  return pa < eb && pb < ea;
}

// Whether a view may reach some element twice: a stride 0 on a dimension of more than one
// element, or a stride smaller than the extent of the dimensions with smaller strides. (This also
// flags an interleaving that happens not to collide; slicing, selecting and transposing never
// make one.)
inline bool reaches_an_element_twice(const TensorView& v) {
  std::array<std::pair<std::int64_t, std::int64_t>, kMaxDims> dims{};  // (stride, size)
  int n = 0;
  for (int d = 0; d < v.ndim; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (v.shape[i] > 1) dims[static_cast<std::size_t>(n++)] = {v.strides[i], v.shape[i]};
  }
  for (int k = 1; k < n; ++k)  // insertion sort by stride: at most kMaxDims entries
    for (int j = k; j > 0 && dims[static_cast<std::size_t>(j)] < dims[static_cast<std::size_t>(j - 1)]; --j)
      std::swap(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
  std::int64_t extent = 1;  // elements spanned by the dimensions of smaller stride
  for (int k = 0; k < n; ++k) {
    const auto [stride, size] = dims[static_cast<std::size_t>(k)];
    if (stride < extent) return true;
    extent = stride * size;
  }
  return false;
}

}  // namespace samebits::detail

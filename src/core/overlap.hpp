// Whether views share elements or reach an element twice: the checks that keep an op's output
// from racing with itself or with its inputs, and that tell copy() when it needs a snapshot.
#pragma once
#include "samebits/errors.hpp"
#include "samebits/tensor.hpp"

#include <array>
#include <cstdint>
#include <utility>

namespace samebits::detail {

inline void require_non_negative_strides(const TensorView& v) {
  for (int d = 0; d < v.ndim; ++d)
    if (v.strides[static_cast<std::size_t>(d)] < 0)
      throw InvalidArgument("negative strides are not supported: " + v.describe());
}

// The elements [0, end) a view spans from its data pointer (non-negative strides only; an empty
// view spans nothing).
inline std::int64_t element_span_end(const TensorView& v) {
  if (v.numel() == 0)
    return 0;
  require_non_negative_strides(v);
  std::int64_t last = 0;
  for (int d = 0; d < v.ndim; ++d)
    last += (v.shape[static_cast<std::size_t>(d)] - 1) * v.strides[static_cast<std::size_t>(d)];
  return last + 1;
}

// Two views of the same elements (same pointer, shape, strides and element size).
inline bool same_elements(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.sizes() == b.sizes() && a.strides == b.strides &&
         size_of(a.dtype) == size_of(b.dtype);
}

namespace overlap_detail {
// Sorts the first n entries of a dims array (at most kMaxDims) by `before`; an insertion sort,
// where std::sort on the array's first n entries draws GCC's false -Warray-bounds.
template <class T, class Before>
void sort_dims(std::array<T, kMaxDims>& dims, int n, Before before) {
  for (int k = 1; k < n; ++k)
    for (int j = k;
         j > 0 && before(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
         --j)
      std::swap(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
}

struct Dim {
  std::int64_t stride = 0;     // bytes
  std::int64_t lo = 0, hi = 0; // the range of i_a - i_b along this dimension
};
// Whether some c_k in [lo_k, hi_k] (dims k >= `k`) gives sum c_k * stride_k in [lo, hi]. Dims are
// sorted by decreasing stride; an enumeration that grows past a few dozen candidates answers yes.
inline bool reachable(const std::array<Dim, kMaxDims>& dims, int n, int k, std::int64_t lo,
                      std::int64_t hi) {
  if (k == n)
    return lo <= 0 && 0 <= hi;
  std::int64_t rest_lo = 0, rest_hi = 0; // what the smaller dims can add
  for (int l = k + 1; l < n; ++l) {
    const Dim& d = dims[static_cast<std::size_t>(l)];
    rest_lo += d.lo * d.stride;
    rest_hi += d.hi * d.stride;
  }
  const Dim& d = dims[static_cast<std::size_t>(k)];
  auto floor_div = [](std::int64_t x, std::int64_t y) {
    return x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
  };
  auto ceil_div = [&](std::int64_t x, std::int64_t y) { return -floor_div(-x, y); };
  const std::int64_t c_lo = std::max(d.lo, ceil_div(lo - rest_hi, d.stride));
  const std::int64_t c_hi = std::min(d.hi, floor_div(hi - rest_lo, d.stride));
  if (c_hi - c_lo > 64)
    return true; // a layout this dense: assume they meet
  for (std::int64_t c = c_lo; c <= c_hi; ++c)
    if (reachable(dims, n, k + 1, lo - c * d.stride, hi - c * d.stride))
      return true;
  return false;
}
} // namespace overlap_detail

// Whether two views share an element's bytes (on one device). Exact for views with the same
// strides (column blocks of one buffer, interleaved slices); others whose byte ranges intersect
// are taken to overlap.
inline bool views_overlap(const TensorView& a, const TensorView& b) {
  if (a.numel() == 0 || b.numel() == 0 || !(a.device == b.device))
    return false;
  const auto e = static_cast<std::int64_t>(size_of(a.dtype));
  const auto* pa = static_cast<const char*>(a.data);
  const auto* pb = static_cast<const char*>(b.data);
  const auto* ea = pa + element_span_end(a) * e;
  const auto* eb = pb + element_span_end(b) * static_cast<std::int64_t>(size_of(b.dtype));
  if (!(pa < eb && pb < ea))
    return false;
  if (size_of(a.dtype) != size_of(b.dtype) || a.ndim != b.ndim)
    return true;
  // Element i of a and j of b meet when |(pa + sum i_k s_k) - (pb + sum j_k s_k)| < e, that is
  // when sum (i_k - j_k) s_k lies in (pb - pa - e, pb - pa + e).
  std::array<overlap_detail::Dim, kMaxDims> dims{};
  int n = 0;
  for (int d = 0; d < a.ndim; ++d) {
    const auto i = static_cast<std::size_t>(d);
    const std::int64_t sa = a.shape[i] > 1 ? a.strides[i] : 0,
                       sb = b.shape[i] > 1 ? b.strides[i] : 0;
    if (sa != sb && a.shape[i] > 1 && b.shape[i] > 1)
      return true; // different layouts
    const std::int64_t stride = (sa != 0 ? sa : sb) * e;
    if (stride == 0)
      continue;
    dims[static_cast<std::size_t>(n++)] = {stride, -(b.shape[i] - 1), a.shape[i] - 1};
  }
  overlap_detail::sort_dims(dims, n,
                            [](const auto& x, const auto& y) { return x.stride > y.stride; });
  const std::int64_t delta = pb - pa;
  return overlap_detail::reachable(dims, n, 0, delta - e + 1, delta + e - 1);
}

// Whether a view may reach some element twice: a stride 0 on a dimension of more than one
// element, or, taking dimensions by increasing stride, a stride that does not clear the elements
// the smaller ones span. (This can also flag an interleaving that happens not to collide; slicing,
// with or without a step, selecting and transposing never make one.)
inline bool reaches_an_element_twice(const TensorView& v) {
  require_non_negative_strides(v);
  std::array<std::pair<std::int64_t, std::int64_t>, kMaxDims> dims{}; // (stride, size)
  int n = 0;
  for (int d = 0; d < v.ndim; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (v.shape[i] > 1)
      dims[static_cast<std::size_t>(n++)] = {v.strides[i], v.shape[i]};
  }
  overlap_detail::sort_dims(dims, n, [](const auto& x, const auto& y) { return x < y; });
  std::int64_t end = 1; // one past the last element the dimensions of smaller stride reach
  for (int k = 0; k < n; ++k) {
    const auto [stride, size] = dims[static_cast<std::size_t>(k)];
    if (stride < end)
      return true;
    end += (size - 1) * stride;
  }
  return false;
}

} // namespace samebits::detail

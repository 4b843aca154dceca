// The layout axis of the backend-ops harness: a tensor's values placed inside a larger buffer as
// a contiguous, feature-strided, transposed, offset or stride-0 view, on any device. The gaps of
// the buffer hold a poison value (NaN, or -7 for integers), so a kernel that reads them shows in
// its result, and the harness checks that no op writes outside its output view.
#pragma once
#include "samebits/samebits.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace samebits::harness {

enum class Layout : std::uint8_t { contiguous, strided, transposed, offset, stride0 };
constexpr Layout kInputLayouts[] = {Layout::contiguous, Layout::strided, Layout::transposed,
                                    Layout::offset, Layout::stride0};
// An output never has a stride-0 dim (it would reach an element twice).
constexpr Layout kOutputLayouts[] = {Layout::contiguous, Layout::strided, Layout::transposed,
                                     Layout::offset};

inline const char* to_string(Layout l) {
  switch (l) {
  case Layout::contiguous:
    return "contiguous";
  case Layout::strided:
    return "strided";
  case Layout::transposed:
    return "transposed";
  case Layout::offset:
    return "offset";
  case Layout::stride0:
    return "stride0";
  }
  return "?";
}

// Whether a layout changes anything for a tensor of `ndim` dims (transposing needs two dims).
inline bool layout_applies(Layout l, int ndim) {
  return l != Layout::transposed || ndim >= 2;
}

// A view `view` into the owning `buffer` (contiguous, on the view's device).
struct Placed {
  Tensor buffer;
  TensorView view;
};

// The elements an offset view skips at the front of its buffer: odd, so that the view is not
// aligned for vector loads.
constexpr std::int64_t kOffsetElements = 3;

// Places `values` (a contiguous CPU tensor) on `device` with layout `l`. For stride0, dim 0 of
// the view has stride 0, so every row of the view is row 0 of `values`; what the view holds (not
// `values`) is what an op reads, so references are computed from the placed view.
inline Placed place(const Tensor& values, Layout l, Device device) {
  const int nd = values.ndim();
  if (!layout_applies(l, nd) || nd == 0)
    l = Layout::contiguous;
  const DType dt = values.dtype();
  const double poison = is_floating(dt) ? std::nan("") : -7.0;
  Shape buf_shape = values.sizes();
  switch (l) {
  case Layout::contiguous:
    break;
  case Layout::strided:
    buf_shape.back() *= 2;
    break;
  case Layout::transposed:
    std::swap(buf_shape[static_cast<std::size_t>(nd - 2)],
              buf_shape[static_cast<std::size_t>(nd - 1)]);
    break;
  case Layout::offset:
    buf_shape = {values.numel() + 2 * kOffsetElements};
    break;
  case Layout::stride0:
    buf_shape[0] = std::min<std::int64_t>(buf_shape[0], 1);
    break;
  }
  Tensor cpu = Tensor::full(buf_shape, poison, dt);
  TensorView v;
  switch (l) {
  case Layout::contiguous:
    v = cpu.view();
    break;
  case Layout::strided:
    v = cpu.view().slice(nd - 1, 0, buf_shape.back(), 2);
    break;
  case Layout::transposed:
    v = cpu.view().transpose(nd - 2, nd - 1);
    break;
  case Layout::offset:
    v = TensorView::contiguous(static_cast<char*>(cpu.raw()) + kOffsetElements * size_of(dt), dt,
                               Device::cpu(), values.sizes());
    break;
  case Layout::stride0:
    v = cpu.view();
    v.shape[0] = values.size(0);
    v.strides[0] = 0;
    break;
  }
  if (l == Layout::stride0) {
    if (values.size(0) > 0)
      copy(values.view().slice(0, 0, 1), cpu.view());
  } else {
    copy(values.view(), v);
  }
  Placed p{device.is_cpu() ? cpu : cpu.to(device), v};
  p.view.data = static_cast<char*>(p.buffer.raw()) +
                (static_cast<char*>(v.data) - static_cast<char*>(cpu.raw()));
  p.view.device = device;
  return p;
}

// The view `v` of `from`'s buffer seen in another buffer of the same size (host copies).
inline TensorView rebase(const TensorView& v, const Tensor& from, const Tensor& to) {
  TensorView r = v;
  r.data =
      static_cast<char*>(to.raw()) + (static_cast<char*>(v.data) - static_cast<char*>(from.raw()));
  r.device = to.device();
  return r;
}

// "" when `after` (a host copy of p's buffer after an op) differs from `before` (one from before
// it) only inside the view, when `inside_allowed`; else where it first differs. Inputs pass
// inside_allowed = false: an op must not write them at all.
inline std::string untouched_outside(const Placed& p, const Tensor& before, const Tensor& after,
                                     bool inside_allowed) {
  Tensor merged = after.clone();
  if (inside_allowed && p.view.numel() > 0) {
    // Put the old values back inside the view: what remains different was written outside it.
    copy(rebase(p.view, p.buffer, before), rebase(p.view, p.buffer, merged));
  }
  const auto* a = static_cast<const unsigned char*>(before.raw());
  const auto* b = static_cast<const unsigned char*>(merged.raw());
  const std::size_t n = before.nbytes(), es = size_of(before.dtype());
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i])
      return (inside_allowed ? "wrote outside its output view at buffer element "
                             : "wrote its input at buffer element ") +
             std::to_string(i / es);
  return "";
}

} // namespace samebits::harness

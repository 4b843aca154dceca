// Tensor views and the owning Tensor: layout queries, views, copies, fills and content hashes.
#include "samebits/tensor.hpp"

#include "core/memory.hpp"
#include "core/overlap.hpp"
#include "core/strided.hpp"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <numeric>
#include <type_traits>
#include <xxhash.h>

namespace samebits {

namespace {
void check_ndim(std::size_t n) {
  if (n > static_cast<std::size_t>(kMaxDims))
    throw InvalidArgument(fmt::format("a tensor of {} dimensions: samebits tensors have at most "
                                      "kMaxDims = {} (merge contiguous dimensions with reshape)",
                                      n, kMaxDims));
}
int norm_dim(int dim, int ndim, const char* what) {
  const int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim)
    throw InvalidArgument(
        fmt::format("{}: dim {} is out of range for a {}-d tensor", what, dim, ndim));
  return d;
}
} // namespace

TensorView TensorView::contiguous(void* data, DType dtype, Device device, const Shape& shape) {
  check_ndim(shape.size());
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = static_cast<int>(shape.size());
  std::int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    if (shape[static_cast<std::size_t>(d)] < 0)
      throw InvalidArgument(
          fmt::format("negative size {} in a shape", shape[static_cast<std::size_t>(d)]));
    v.shape[static_cast<std::size_t>(d)] = shape[static_cast<std::size_t>(d)];
    v.strides[static_cast<std::size_t>(d)] = stride;
    stride *= std::max<std::int64_t>(shape[static_cast<std::size_t>(d)], 1);
  }
  return v;
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < ndim; ++d)
    n *= shape[static_cast<std::size_t>(d)];
  return n;
}

bool TensorView::is_contiguous() const {
  std::int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    const auto s = shape[static_cast<std::size_t>(d)];
    if (s != 1 && strides[static_cast<std::size_t>(d)] != expected)
      return false;
    expected *= s;
  }
  return true;
}

std::int64_t TensorView::offset(std::span<const std::int64_t> idx) const {
  std::int64_t o = 0;
  for (int d = 0; d < ndim; ++d)
    o += idx[static_cast<std::size_t>(d)] * strides[static_cast<std::size_t>(d)];
  return o;
}

TensorView TensorView::transpose(int d0, int d1) const {
  TensorView v = *this;
  d0 = norm_dim(d0, ndim, "transpose");
  d1 = norm_dim(d1, ndim, "transpose");
  std::swap(v.shape[static_cast<std::size_t>(d0)], v.shape[static_cast<std::size_t>(d1)]);
  std::swap(v.strides[static_cast<std::size_t>(d0)], v.strides[static_cast<std::size_t>(d1)]);
  return v;
}

TensorView TensorView::select(int dim, std::int64_t i) const {
  dim = norm_dim(dim, ndim, "select");
  if (i < 0 || i >= shape[static_cast<std::size_t>(dim)])
    throw IndexOutOfRange(fmt::format("select: index {} out of range [0, {})", i,
                                      shape[static_cast<std::size_t>(dim)]));
  TensorView v = *this;
  v.data = static_cast<char*>(data) +
           i * strides[static_cast<std::size_t>(dim)] * static_cast<std::int64_t>(size_of(dtype));
  for (int d = dim; d + 1 < ndim; ++d) {
    v.shape[static_cast<std::size_t>(d)] = shape[static_cast<std::size_t>(d + 1)];
    v.strides[static_cast<std::size_t>(d)] = strides[static_cast<std::size_t>(d + 1)];
  }
  v.ndim = ndim - 1;
  v.shape[static_cast<std::size_t>(v.ndim)] = 0;
  v.strides[static_cast<std::size_t>(v.ndim)] = 0;
  return v;
}

TensorView TensorView::slice(int dim, std::int64_t begin, std::int64_t end,
                             std::int64_t step) const {
  dim = norm_dim(dim, ndim, "slice");
  const auto n = shape[static_cast<std::size_t>(dim)];
  if (step <= 0)
    throw InvalidArgument("slice: step must be positive");
  if (begin < 0 || end > n || begin > end)
    throw IndexOutOfRange(fmt::format("slice: [{}, {}) out of range [0, {})", begin, end, n));
  TensorView v = *this;
  v.data = static_cast<char*>(data) + begin * strides[static_cast<std::size_t>(dim)] *
                                          static_cast<std::int64_t>(size_of(dtype));
  v.shape[static_cast<std::size_t>(dim)] = (end - begin + step - 1) / step;
  v.strides[static_cast<std::size_t>(dim)] *= step;
  return v;
}

TensorView TensorView::reshape(const Shape& s) const {
  if (!is_contiguous())
    throw InvalidArgument("reshape: only contiguous views can be reshaped; copy first");
  const auto n = std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
  if (n != numel())
    throw InvalidArgument(
        fmt::format("reshape: {} elements cannot take a shape of {}", numel(), n));
  return contiguous(data, dtype, device, s);
}

std::string TensorView::describe() const {
  const auto n = static_cast<std::size_t>(ndim);
  const std::string dims = fmt::format("{}", fmt::join(shape.begin(), shape.begin() + n, ", "));
  const std::string strs = fmt::format("{}", fmt::join(strides.begin(), strides.begin() + n, ", "));
  return fmt::format("{}[{}] {}{}", to_string(dtype), dims, to_string(device),
                     is_contiguous() ? "" : " (strides " + strs + ")");
}

void TensorView::throw_dtype_mismatch(DType wanted) const {
  throw InvalidArgument(fmt::format("expected a {} tensor, got {}", to_string(wanted), describe()));
}

// --- Tensor ---------------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, device, Stream{});
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, Stream stream) {
  check_ndim(shape.size());
  // Sizes are checked before anything is allocated: none negative, and the bytes within 2^63.
  bool has_zero = false, overflow = false;
  std::int64_t bytes_needed = static_cast<std::int64_t>(size_of(dtype));
  for (const std::int64_t d : shape) {
    if (d < 0)
      throw InvalidArgument(
          fmt::format("Tensor: negative size in shape [{}]", fmt::join(shape, ", ")));
    has_zero = has_zero || d == 0;
    overflow = overflow || __builtin_mul_overflow(bytes_needed, d, &bytes_needed);
  }
  if (overflow && !has_zero) // an empty tensor allocates nothing, whatever its other sizes
    throw InvalidArgument(
        fmt::format("Tensor: a {} tensor of shape [{}] would take more than 2^63 bytes",
                    to_string(dtype), fmt::join(shape, ", ")));
  Tensor t;
  t.view_ = TensorView::contiguous(nullptr, dtype, device, shape);
  const auto bytes = static_cast<std::size_t>(t.view_.numel()) * size_of(dtype);
  void* p = detail::allocate_bytes(bytes, device, stream);
  t.storage_ = std::shared_ptr<void>(
      p, [device, stream](void* q) { detail::free_bytes(q, device, stream); });
  t.view_.data = p;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor h = empty(shape, dtype, Device::cpu());
  fill(h.view(), value);
  return device.is_cpu() ? h : h.to(device);
}

Tensor Tensor::copy_of(const TensorView& v, Device device) {
  return copy_of(v, device, Stream{});
}

Tensor Tensor::copy_of(const TensorView& v, Device device, Stream stream) {
  Tensor t = empty(v.sizes(), v.dtype, device, stream);
  // copy() writes on the default stream: wait for what `stream` still runs on this block (it was
  // last freed there), which a non-blocking stream would not order before the copy.
  if (device.is_cuda() && stream.handle != nullptr && t.numel() > 0) {
    const detail::CurrentDevice on_device(device);
    detail::cuda_synchronize(stream);
  }
  copy(v, t.view());
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == view_.device)
    return *this;
  return copy_of(view_, device);
}

// --- copies, fills, hashes ----------------------------------------------------------------------

namespace {
// Whether a view's elements are all the elements of its span, each once (a contiguous or a
// transposed tensor): writing every element leaves no byte between them to keep.
bool covers_its_span(const TensorView& v) {
  return v.numel() == detail::element_span_end(v) && !detail::reaches_an_element_twice(v);
}

// What the caller does with a host_view: reads it, or writes every one of its elements.
enum class Access { read, overwrite };

// A CPU view of `v`: `v` itself, or a host buffer of the bytes it spans (kept alive in `hold`),
// holding the device's bytes, except for a view to overwrite that covers its span: there no old
// byte survives, and they may never have been written, so they are not read.
TensorView host_view(const TensorView& v, Tensor& hold, Access access = Access::read) {
  if (v.device.is_cpu() || v.numel() == 0) {
    TensorView h = v;
    h.device = Device::cpu();
    return h;
  }
  const std::int64_t span = detail::element_span_end(v);
  hold = Tensor::empty({span}, v.dtype, Device::cpu());
  if (access == Access::read || !covers_its_span(v))
    detail::copy_bytes(hold.raw(), Device::cpu(), v.data, v.device,
                       static_cast<std::size_t>(span) * size_of(v.dtype));
  TensorView h = v;
  h.data = hold.raw();
  h.device = Device::cpu();
  return h;
}

} // namespace

void copy(const TensorView& src, const TensorView& dst) {
  if (src.sizes() != dst.sizes() || src.dtype != dst.dtype)
    throw InvalidArgument(
        fmt::format("copy: {} into {}: shapes or dtypes differ", src.describe(), dst.describe()));
  if (src.numel() == 0)
    return;
  if (detail::views_overlap(src, dst)) {
    if (detail::same_elements(src, dst))
      return;
    // Reading src while writing dst would read what was just written: copy from a snapshot.
    const Tensor snapshot = Tensor::copy_of(src, src.device);
    copy(snapshot.view(), dst);
    return;
  }
  const auto bytes = static_cast<std::size_t>(src.numel()) * size_of(src.dtype);
  if (src.is_contiguous() && dst.is_contiguous()) {
    detail::copy_bytes(dst.data, dst.device, src.data, src.device, bytes);
    return;
  }
  if (src.device.is_cuda() && src.device == dst.device && !detail::reaches_an_element_twice(dst)) {
    detail::cuda_copy_strided(src, dst); // one kernel, not a host round trip
    return;
  }
  // Through the host: src (a snapshot where it is on a GPU) written into dst in row-major order,
  // so that where dst repeats an element, the last write wins.
  Tensor hold_src;
  const TensorView hs = host_view(src, hold_src);
  if (dst.device.is_cpu()) {
    detail::for_each_element(hs, dst, [&](std::int64_t os, std::int64_t od) {
      std::memcpy(static_cast<char*>(dst.data) + od * static_cast<std::int64_t>(size_of(dst.dtype)),
                  static_cast<const char*>(hs.data) +
                      os * static_cast<std::int64_t>(size_of(hs.dtype)),
                  size_of(dst.dtype));
    });
    return;
  }
  // Strided destination on a device: read its span (unless dst covers all of it), write into it
  // on the host, copy it back.
  Tensor hold_dst;
  const TensorView hd = host_view(dst, hold_dst, Access::overwrite);
  copy(hs, hd);
  detail::copy_bytes(dst.data, dst.device, hd.data, Device::cpu(),
                     static_cast<std::size_t>(detail::element_span_end(dst)) * size_of(dst.dtype));
}

void fill(const TensorView& dst, double value) {
  detail::visit_dtype(dst.dtype, [&]<class T>() {
    // An integer dtype takes the value truncated toward zero; one it cannot hold (NaN included)
    // is refused, where the conversion would be undefined.
    if constexpr (std::is_integral_v<T>) {
      const double lo = static_cast<double>(std::numeric_limits<T>::min());
      const double end = -lo; // 2^31 or 2^63, exactly
      if (!(std::trunc(value) >= lo && value < end))
        throw InvalidArgument(fmt::format("fill: {} does not fit {}", value, to_string(dst.dtype)));
    }
  });
  if (dst.numel() == 0)
    return;
  // A device tensor that covers its span (contiguous or transposed) is written whole: its old
  // bytes are not read (it may be fresh memory). Another strided one is read for the bytes
  // between its elements, which stay as they were.
  Tensor hold;
  const TensorView h = host_view(dst, hold, Access::overwrite);
  detail::visit_dtype(h.dtype, [&]<class T>() {
    const T v = static_cast<T>(value);
    T* p = static_cast<T*>(h.data);
    detail::for_each_element(h, h, [&](std::int64_t o, std::int64_t) { p[o] = v; });
  });
  if (!dst.device.is_cpu())
    detail::copy_bytes(dst.data, dst.device, h.data, Device::cpu(),
                       static_cast<std::size_t>(detail::element_span_end(dst)) *
                           size_of(dst.dtype));
}

std::uint64_t content_hash(const TensorView& t) {
  Tensor c = Tensor::copy_of(t, Device::cpu());
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  const std::uint8_t dt = static_cast<std::uint8_t>(t.dtype);
  XXH3_64bits_update(st, &dt, 1);
  for (int d = 0; d < t.ndim; ++d)
    XXH3_64bits_update(st, &t.shape[static_cast<std::size_t>(d)], 8);
  XXH3_64bits_update(st, c.raw(), c.nbytes());
  const auto h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

std::string hash_hex(std::uint64_t h) {
  return fmt::format("{:016x}", h);
}

bool bitwise_equal(const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype || a.sizes() != b.sizes())
    return false;
  Tensor ca = Tensor::copy_of(a, Device::cpu()), cb = Tensor::copy_of(b, Device::cpu());
  return std::memcmp(ca.raw(), cb.raw(), ca.nbytes()) == 0;
}

} // namespace samebits

// Conversions between floating dtypes on the host, and the float32 staging of half tensors.
#include "core/convert.hpp"

#include "core/memory.hpp"
#include "core/overlap.hpp"
#include "core/strided.hpp"
#include "cpu/thread_pool.hpp"
#include "samebits/half.hpp"

#include <fmt/format.h>
#include <type_traits>

namespace samebits {

namespace {

// D from S: half types through float32 (exact on the way in, rounded once on the way out); a
// float64 into a half type is rounded once, correctly (see half.hpp).
template <class D, class S> D convert_one(S s) {
  if constexpr (std::is_same_v<D, S>)
    return s;
  else if constexpr (is_half_v<S> && is_half_v<D>)
    return D(static_cast<float>(s));
  else
    return static_cast<D>(s);
}

void check_floating(const char* what, const TensorView& src, const TensorView& dst) {
  if (!is_floating(src.dtype) || !is_floating(dst.dtype))
    throw InvalidArgument(fmt::format("{}: floating dtypes only, got {} into {}", what,
                                      src.describe(), dst.describe()));
  if (src.numel() != dst.numel())
    throw InvalidArgument(
        fmt::format("{}: {} and {} differ in size", what, src.describe(), dst.describe()));
}

} // namespace

namespace detail {

void convert_contiguous(const TensorView& src, const TensorView& dst, Stream stream) {
  check_floating("convert", src, dst);
  if (dst.numel() == 0)
    return;
  if (dst.device.is_cuda()) {
    cuda_convert_contiguous(src, dst, stream);
    return;
  }
  const std::int64_t n = dst.numel();
  constexpr std::int64_t kChunk = 1 << 16;
  visit_dtype(src.dtype, [&]<class S>() {
    visit_dtype(dst.dtype, [&]<class D>() {
      if constexpr (!std::is_integral_v<S> && !std::is_integral_v<D>) {
        const S* s = static_cast<const S*>(src.data);
        D* d = static_cast<D*>(dst.data);
        parallel_for((n + kChunk - 1) / kChunk, [&](std::int64_t t) {
          for (std::int64_t i = t * kChunk; i < std::min(n, (t + 1) * kChunk); ++i)
            d[i] = convert_one<D>(s[i]);
        });
      }
    });
  });
}

Tensor to_dtype(const TensorView& v, DType dtype, Stream stream) {
  const Tensor c = v.is_contiguous() ? Tensor{} : Tensor::copy_of(v, v.device, stream);
  TensorView s = v.is_contiguous() ? v : c.view();
  Tensor f = Tensor::empty(v.sizes(), dtype, v.device, stream);
  convert_contiguous(s, f.view(), stream);
  if (v.device.is_cuda())
    cuda_synchronize(stream);
  return f;
}

void round_into(const TensorView& wide, const TensorView& dst, Stream stream) {
  if (dst.is_contiguous()) {
    convert_contiguous(wide, dst, stream);
  } else {
    const Tensor t = Tensor::empty(dst.sizes(), dst.dtype, dst.device, stream);
    convert_contiguous(wide, t.view(), stream);
    if (dst.device.is_cuda())
      cuda_synchronize(stream);
    copy(t.view(), dst);
  }
  if (dst.device.is_cuda())
    cuda_synchronize(stream);
}

} // namespace detail

void convert(const TensorView& src, const TensorView& dst) {
  check_floating("convert", src, dst);
  if (src.sizes() != dst.sizes())
    throw InvalidArgument(
        fmt::format("convert: {} into {}: shapes differ", src.describe(), dst.describe()));
  if (src.dtype == dst.dtype) {
    copy(src, dst);
    return;
  }
  // On dst's device, contiguous: the conversion kernel; anything else goes through copies.
  const bool direct = src.device == dst.device && src.is_contiguous() && dst.is_contiguous() &&
                      !detail::views_overlap(src, dst);
  if (direct) {
    detail::convert_contiguous(src, dst);
    if (dst.device.is_cuda())
      detail::cuda_synchronize({});
    return;
  }
  const Tensor s = Tensor::copy_of(src, dst.device);
  const Tensor t = Tensor::empty(dst.sizes(), dst.dtype, dst.device);
  detail::convert_contiguous(s.view(), t.view());
  if (dst.device.is_cuda())
    detail::cuda_synchronize({});
  copy(t.view(), dst);
}

} // namespace samebits

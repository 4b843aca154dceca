// CUDA conversion between floating dtypes: the same integer rounding as the host (half.hpp), so
// a tensor converted on the GPU has the bits the CPU gives it.
#include "core/convert.hpp"
#include "core/memory.hpp"
#include "cuda/check.cuh"
#include "samebits/half.hpp"

#include <cuda_runtime.h>
#include <type_traits>

namespace samebits::detail {

namespace {

template <class D, class S> __device__ D convert_one(S s) {
  if constexpr (std::is_same_v<D, S>)
    return s;
  else if constexpr (is_half_v<D> && std::is_same_v<S, double>)
    return D(half_bits::float_round_to_odd_device(s));
  else if constexpr (is_half_v<D>)
    return D(static_cast<float>(s));
  else if constexpr (is_half_v<S>)
    return static_cast<D>(static_cast<float>(s));
  else
    return static_cast<D>(s);
}

template <class D, class S> __global__ void convert_kernel(const S* src, D* dst, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    dst[i] = convert_one<D>(src[i]);
}

template <class F> void visit_floating(DType t, F&& f) {
  switch (t) {
  case DType::f32:
    return f.template operator()<float>();
  case DType::f64:
    return f.template operator()<double>();
  case DType::bf16:
    return f.template operator()<bf16>();
  case DType::f16:
    return f.template operator()<f16>();
  default:
    throw InvalidArgument("convert: floating dtypes only");
  }
}

} // namespace

void cuda_convert_contiguous(const TensorView& src, const TensorView& dst, Stream stream) {
  const std::int64_t n = dst.numel();
  if (n == 0)
    return;
  const CurrentDevice on_device(dst.device);
  constexpr int threads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>((n + threads - 1) / threads, 65536));
  visit_floating(src.dtype, [&]<class S>() {
    visit_floating(dst.dtype, [&]<class D>() {
      convert_kernel<D, S><<<blocks, threads, 0, SAMEBITS_STREAM(stream)>>>(
          static_cast<const S*>(src.data), static_cast<D*>(dst.data), n);
      SAMEBITS_CUDA_CHECK_LAUNCH("convert_kernel");
    });
  });
}

} // namespace samebits::detail

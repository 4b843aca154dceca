// CUDA kernels of the distributed fixed-point conversions: the element rules of dist/
// fixed_point.hpp, one thread per element (grid-stride), so the bits equal the CPU loops'.
// (Messages are built with std::string: fmt's compile-time format checks do not pass nvcc.)
#include "dist/fixed_point.hpp"
#include "samebits/errors.hpp"
#include "samebits/tensor.hpp"

#include <cuda_runtime.h>
#include <string>

namespace samebits::detail {

namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

void check_launch(const char* op) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw CudaError(std::string(op) + ": kernel launch failed: " + cudaGetErrorString(e));
}

template <class T>
__global__ void to_fixed_kernel(const T* x, std::int64_t n, int s, double limit, std::int64_t* out,
                                unsigned long long* overflow, bool accumulate) {
  unsigned long long bad = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t q = 0;
    if (!fixed_from_value(static_cast<double>(x[i]), s, limit, q)) {
      ++bad;
      continue;
    }
    out[i] = accumulate ? out[i] + q : q;
  }
  if (bad != 0)
    atomicAdd(overflow, bad); // an integer count: the order of the additions does not matter
}

template <class T>
__global__ void from_fixed_kernel(const std::int64_t* q, std::int64_t n, int s, double divisor,
                                  T* out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = fixed_to_value<T>(q[i], s, divisor);
}

// max over non-negative doubles: their bit patterns order like the values, so an unsigned
// atomicMax on the bits is exact and order-independent. out must start at +0.
template <class T>
__global__ void max_abs_kernel(const T* x, std::int64_t n, unsigned long long* out) {
  double m = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double a = fabs(static_cast<double>(x[i]));
    if (isfinite(a) && a > m)
      m = a;
  }
  atomicMax(out, static_cast<unsigned long long>(__double_as_longlong(m)));
}

} // namespace

void to_fixed_cuda(const TensorView& x, int s, double limit, const TensorView& out,
                   const TensorView& overflow, bool accumulate, Stream stream) {
  const std::int64_t n = x.numel();
  auto st = static_cast<cudaStream_t>(stream.handle);
  auto* f = reinterpret_cast<unsigned long long*>(overflow.ptr<std::int64_t>());
  if (x.dtype == DType::f32)
    to_fixed_kernel<<<blocks_for(n), kThreads, 0, st>>>(x.ptr<float>(), n, s, limit,
                                                        out.ptr<std::int64_t>(), f, accumulate);
  else
    to_fixed_kernel<<<blocks_for(n), kThreads, 0, st>>>(x.ptr<double>(), n, s, limit,
                                                        out.ptr<std::int64_t>(), f, accumulate);
  check_launch("to_fixed");
}

void from_fixed_cuda(const TensorView& q, int s, double divisor, const TensorView& out,
                     Stream stream) {
  const std::int64_t n = q.numel();
  auto st = static_cast<cudaStream_t>(stream.handle);
  if (out.dtype == DType::f32)
    from_fixed_kernel<<<blocks_for(n), kThreads, 0, st>>>(q.ptr<std::int64_t>(), n, s, divisor,
                                                          out.ptr<float>());
  else
    from_fixed_kernel<<<blocks_for(n), kThreads, 0, st>>>(q.ptr<std::int64_t>(), n, s, divisor,
                                                          out.ptr<double>());
  check_launch("from_fixed");
}

void max_abs_finite_cuda(const TensorView& x, const TensorView& out, Stream stream) {
  const std::int64_t n = x.numel();
  auto st = static_cast<cudaStream_t>(stream.handle);
  auto* o = reinterpret_cast<unsigned long long*>(out.ptr<double>());
  if (cudaMemsetAsync(o, 0, sizeof(double), st) != cudaSuccess)
    throw CudaError("max_abs_finite: cudaMemsetAsync failed");
  if (x.dtype == DType::f32)
    max_abs_kernel<<<blocks_for(n), kThreads, 0, st>>>(x.ptr<float>(), n, o);
  else
    max_abs_kernel<<<blocks_for(n), kThreads, 0, st>>>(x.ptr<double>(), n, o);
  check_launch("max_abs_finite");
}

} // namespace samebits::detail

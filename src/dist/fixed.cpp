// The distributed fixed-point conversions: argument checks, the CPU loops, and the hand-off to
// the CUDA kernels (dist/fixed_cuda.cu) for CUDA tensors.
#include "dist/fixed_point.hpp"
#include "samebits/distributed.hpp"
#include "samebits/errors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fmt/format.h>

namespace samebits {

namespace detail {
#if defined(SAMEBITS_HAS_CUDA)
void to_fixed_cuda(const TensorView& x, int s, double limit, const TensorView& out,
                   const TensorView& overflow, bool accumulate, Stream stream);
void from_fixed_cuda(const TensorView& q, int s, double divisor, const TensorView& out,
                     Stream stream);
void max_abs_finite_cuda(const TensorView& x, const TensorView& out, Stream stream);
#endif
} // namespace detail

namespace {

using namespace detail;

void check_float_contiguous(const char* op, const char* what, const TensorView& t) {
  if (t.dtype != DType::f32 && t.dtype != DType::f64)
    throw InvalidArgument(
        fmt::format("{}: {} must be float32 or float64, got {}", op, what, t.describe()));
  if (!t.is_contiguous())
    throw InvalidArgument(fmt::format("{}: {} must be contiguous, got {}", op, what, t.describe()));
}

void check_i64(const char* op, const char* what, const TensorView& t, std::int64_t numel,
               Device device) {
  if (t.dtype != DType::i64 || !t.is_contiguous() || t.numel() != numel || !(t.device == device))
    throw InvalidArgument(fmt::format("{}: {} must be a contiguous int64 of {} elements on {}, "
                                      "got {}",
                                      op, what, numel, to_string(device), t.describe()));
}

void check_scale(const char* op, int s) {
  if (s < -kMaxFixedScale || s > kMaxFixedScale)
    throw InvalidArgument(
        fmt::format("{}: the scale 2^{} is outside 2^+-{}", op, s, kMaxFixedScale));
}

template <class T>
void to_fixed_cpu(const T* x, std::int64_t n, int s, double limit, std::int64_t* out,
                  std::int64_t* overflow, bool accumulate) {
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t q = 0;
    if (!fixed_from_value(static_cast<double>(x[i]), s, limit, q)) {
      ++bad;
      continue;
    }
    out[i] = accumulate ? out[i] + q : q;
  }
  *overflow += bad;
}

template <class T>
void from_fixed_cpu(const std::int64_t* q, std::int64_t n, int s, double divisor, T* out) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = fixed_to_value<T>(q[i], s, divisor);
}

template <class T> double max_abs_cpu(const T* x, std::int64_t n) {
  double m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (std::isfinite(a) && a > m)
      m = a;
  }
  return m;
}

} // namespace

int fixed_scale(double max_abs, int headroom_log2, int contributions_log2) {
  if (!(max_abs >= 0) || !std::isfinite(max_abs))
    throw InvalidArgument(fmt::format("fixed_scale: the reference max-abs must be finite and >= "
                                      "0, got {}",
                                      max_abs));
  int e = 1; // M = 0 counts as M = 1 (2^0 <= 1 < 2^1)
  if (max_abs > 0)
    (void)std::frexp(max_abs, &e); // max_abs = f * 2^e, f in [0.5, 1)
  const int s = 62 - contributions_log2 - headroom_log2 - e;
  return std::clamp(s, -kMaxFixedScale, kMaxFixedScale);
}

void to_fixed(const TensorView& x, int s, const TensorView& out, const TensorView& overflow,
              bool accumulate, int contributions_log2, const Options& opts) {
  check_float_contiguous("to_fixed", "x", x);
  check_i64("to_fixed", "out", out, x.numel(), x.device);
  check_i64("to_fixed", "overflow", overflow, 1, x.device);
  check_scale("to_fixed", s);
  if (contributions_log2 < 0 || contributions_log2 > 61)
    throw InvalidArgument(
        fmt::format("to_fixed: contributions_log2 must be in [0, 61], got {}", contributions_log2));
  const double limit = std::ldexp(1.0, 62 - contributions_log2);
  (void)opts; // the stream matters on CUDA only
  if (x.device.is_cuda()) {
#if defined(SAMEBITS_HAS_CUDA)
    to_fixed_cuda(x, s, limit, out, overflow, accumulate, opts.stream);
    return;
#else
    throw BackendUnavailable("to_fixed: this build has no CUDA backend");
#endif
  }
  auto* o = out.ptr<std::int64_t>();
  auto* f = overflow.ptr<std::int64_t>();
  if (x.dtype == DType::f32)
    to_fixed_cpu(x.ptr<float>(), x.numel(), s, limit, o, f, accumulate);
  else
    to_fixed_cpu(x.ptr<double>(), x.numel(), s, limit, o, f, accumulate);
}

void from_fixed(const TensorView& q, int s, std::int64_t divisor, const TensorView& out,
                const Options& opts) {
  check_float_contiguous("from_fixed", "out", out);
  check_i64("from_fixed", "q", q, out.numel(), out.device);
  check_scale("from_fixed", s);
  if (divisor < 1)
    throw InvalidArgument(fmt::format("from_fixed: the divisor must be >= 1, got {}", divisor));
  const auto d = static_cast<double>(divisor);
  (void)opts; // the stream matters on CUDA only
  if (out.device.is_cuda()) {
#if defined(SAMEBITS_HAS_CUDA)
    from_fixed_cuda(q, s, d, out, opts.stream);
    return;
#else
    throw BackendUnavailable("from_fixed: this build has no CUDA backend");
#endif
  }
  const auto* p = q.ptr<std::int64_t>();
  if (out.dtype == DType::f32)
    from_fixed_cpu(p, q.numel(), s, d, out.ptr<float>());
  else
    from_fixed_cpu(p, q.numel(), s, d, out.ptr<double>());
}

void max_abs_finite(const TensorView& x, const TensorView& out, const Options& opts) {
  check_float_contiguous("max_abs_finite", "x", x);
  if (out.dtype != DType::f64 || out.numel() != 1 || !(out.device == x.device))
    throw InvalidArgument(fmt::format("max_abs_finite: out must be a float64[1] on {}, got {}",
                                      to_string(x.device), out.describe()));
  (void)opts;
  if (x.device.is_cuda()) {
#if defined(SAMEBITS_HAS_CUDA)
    max_abs_finite_cuda(x, out, opts.stream);
    return;
#else
    throw BackendUnavailable("max_abs_finite: this build has no CUDA backend");
#endif
  }
  *out.ptr<double>() = x.dtype == DType::f32 ? max_abs_cpu(x.ptr<float>(), x.numel())
                                             : max_abs_cpu(x.ptr<double>(), x.numel());
}

} // namespace samebits

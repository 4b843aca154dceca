// Operands in every storage layout, the float64 reference and the canonical order written out
// literally, shared by the CPU and GPU tests of gemm.
#pragma once
#include "testing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace samebits::testing {

// How an operand is stored: contiguous, a column slice of a wider (NaN-padded) buffer (leading
// dimension > cols), every other column (no unit stride), or column-major (a transposed view).
enum class Layout { contiguous, leading_dim, strided, column_major };

struct Operand {
  Tensor values; // contiguous copy of the logical contents, on the CPU
  Tensor keep;   // storage behind `view`
  TensorView view;
};

inline Operand make_operand(std::int64_t rows, std::int64_t cols, DType dtype, std::uint64_t seed,
                            Layout layout, Device device = Device::cpu()) {
  Operand o;
  o.values = random_normal({rows, cols}, dtype, seed);
  switch (layout) {
  case Layout::contiguous:
    o.keep = device.is_cpu() ? o.values : o.values.to(device);
    o.view = o.keep.view();
    break;
  case Layout::leading_dim:
    o.keep = Tensor::full({rows, cols + 5}, std::nan(""), dtype, device);
    o.view = o.keep.view().slice(1, 0, cols);
    copy(o.values, o.view);
    break;
  case Layout::strided:
    o.view = strided_copy(device.is_cpu() ? o.values : o.values.to(device), o.keep);
    break;
  case Layout::column_major:
    o.keep = Tensor::empty({cols, rows}, dtype, device);
    o.view = o.keep.view().transpose(0, 1);
    copy(o.values, o.view);
    break;
  }
  return o;
}

// float64 reference of c = alpha * op(a) @ op(b) + beta * c (beta == 0: c ignored); `mag`, when
// given, receives |alpha| * sum |a||b| + |beta c| per element, the scale of the rounding error.
inline std::vector<double> gemm_reference(Transpose ta, Transpose tb, double alpha, const Tensor& a,
                                          const Tensor& b, double beta,
                                          const std::vector<double>& c0, std::int64_t m,
                                          std::int64_t n, std::int64_t k,
                                          std::vector<double>* mag = nullptr) {
  constexpr Transpose kT = Transpose::yes;
  if (mag)
    mag->assign(static_cast<std::size_t>(m * n), 0.0);
  const auto av = to_doubles(a), bv = to_doubles(b);
  std::vector<double> r(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double s = 0, sa = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = ta == kT ? av[static_cast<std::size_t>(p * m + i)]
                                  : av[static_cast<std::size_t>(i * k + p)];
        const double y = tb == kT ? bv[static_cast<std::size_t>(j * k + p)]
                                  : bv[static_cast<std::size_t>(p * n + j)];
        s += static_cast<long double>(x) * y;
        sa += std::abs(static_cast<long double>(x) * y);
      }
      const auto e = static_cast<std::size_t>(i * n + j);
      if (mag)
        (*mag)[e] =
            static_cast<double>(std::abs(alpha) * sa + (beta == 0 ? 0 : std::abs(beta * c0[e])));
      r[e] = static_cast<double>(alpha * s +
                                 (beta == 0 ? 0.0L : beta * static_cast<long double>(c0[e])));
    }
  return r;
}

// The canonical order of include/samebits/ops/gemm.hpp written out as it reads: k blocks of 256
// as std::fma chains from +0, the recursive tree with the largest power of two on the left, then
// the epilogue. (The kernels use the binary-counter form instead; this checks that they agree.)
template <class T> T canonical_tree(const std::vector<T>& s, std::int64_t lo, std::int64_t hi) {
  if (hi - lo == 1)
    return s[static_cast<std::size_t>(lo)];
  std::int64_t h = 1;
  while (2 * h < hi - lo)
    h *= 2;
  return canonical_tree(s, lo, lo + h) + canonical_tree(s, lo + h, hi);
}

template <class T>
std::vector<T> canonical_gemm(Transpose ta, Transpose tb, double alpha_d, const Tensor& a,
                              const Tensor& b, double beta_d, const std::vector<T>& c0,
                              std::int64_t m, std::int64_t n, std::int64_t k) {
  constexpr Transpose kT = Transpose::yes;
  constexpr std::int64_t KB = 256;
  const auto av = a.to_vector<T>(), bv = b.to_vector<T>();
  const T alpha = static_cast<T>(alpha_d), beta = static_cast<T>(beta_d);
  std::vector<T> r(c0), blocks;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const auto e = static_cast<std::size_t>(i * n + j);
      blocks.clear();
      for (std::int64_t p0 = 0; p0 < k; p0 += KB) {
        T s = T(0);
        for (std::int64_t p = p0; p < std::min(k, p0 + KB); ++p) {
          const T x = ta == kT ? av[static_cast<std::size_t>(p * m + i)]
                               : av[static_cast<std::size_t>(i * k + p)];
          const T y = tb == kT ? bv[static_cast<std::size_t>(j * k + p)]
                               : bv[static_cast<std::size_t>(p * n + j)];
          s = std::fma(x, y, s);
        }
        blocks.push_back(s);
      }
      const T acc =
          k == 0 ? T(0) : canonical_tree(blocks, 0, static_cast<std::int64_t>(blocks.size()));
      if (alpha == T(0)) {
        r[e] = beta == T(0) ? T(0) : beta == T(1) ? c0[e] : beta * c0[e];
        continue;
      }
      const T t = alpha == T(1) ? acc : alpha * acc;
      if (beta == T(0)) {
        r[e] = t;
        continue;
      }
      const T u = beta == T(1) ? c0[e] : beta * c0[e];
      r[e] = t + u;
    }
  return r;
}

} // namespace samebits::testing

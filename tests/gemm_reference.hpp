// Operands in every storage layout and the float64 reference shared by the CPU and GPU tests of
// gemm.
#pragma once
#include "testing.hpp"

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

} // namespace samebits::testing

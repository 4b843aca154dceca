// The accuracy check shared by the CPU and GPU tests of cumsum.
#pragma once
#include "testing.hpp"

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>

namespace samebits::testing {

// Per line of a contiguous [outer, len, inner] tensor x: |out - ref| within depth(i) * u * sum |x|
// at every position i, ref a long-double running sum. Portable variants are held to the bound of
// include/samebits/ops/scan.hpp (depth i / 2048 + 51); `ng_depth` is the bound of the backend's
// not_guaranteed variant (a sequential sum on the CPU, chunks on CUDA).
template <class NgDepth>
void expect_cumsum_close(const Tensor& x, int dim, const TensorView& out, Determinism level,
                         NgDepth ng_depth) {
  const auto v = to_doubles(x), o = to_doubles(out);
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d)
    outer *= x.size(d);
  for (int d = dim + 1; d < x.ndim(); ++d)
    inner *= x.size(d);
  const std::int64_t len = x.size(dim);
  const double u = x.dtype() == DType::f32 ? 0x1p-24 : 0x1p-53;
  int bad = 0;
  for (std::int64_t a = 0; a < outer; ++a)
    for (std::int64_t c = 0; c < inner; ++c) {
      long double s = 0, mag = 0;
      for (std::int64_t i = 0; i < len; ++i) {
        const auto k = static_cast<std::size_t>((a * len + i) * inner + c);
        s += v[k];
        mag += std::abs(v[k]);
        const double depth = level == Determinism::portable ? static_cast<double>(i / 2048 + 51)
                                                            : static_cast<double>(ng_depth(i));
        const double bound = depth * u * static_cast<double>(mag) * 1.01;
        if (!(std::abs(o[k] - static_cast<double>(s)) <= bound) && bad++ < 5)
          ADD_FAILURE() << "line (" << a << ", " << c << ") i=" << i << ": " << o[k] << " vs "
                        << static_cast<double>(s) << " bound " << bound;
      }
    }
  EXPECT_EQ(bad, 0);
}

} // namespace samebits::testing

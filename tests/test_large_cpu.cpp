// More than 2^31 elements: positions, offsets and indices stay 64-bit from validation to the
// kernels. The inputs are stride-0 views (one stored row seen 2^31 + 8 times), so the tests need
// no large allocation.
#include "testing.hpp"

#include <cstdint>
#include <vector>

namespace samebits {
namespace {

constexpr std::int64_t kBig = (std::int64_t{1} << 31) + 8;

// `rows` copies of the row at `v` (cols values): a view whose rows all alias one row.
TensorView repeated_row(double* v, std::int64_t rows, std::int64_t cols) {
  TensorView t = TensorView::of(v, {1, cols});
  t.shape[0] = rows;
  t.strides[0] = 0;
  return t;
}

TEST(LargeCpu, IndexSelectReachesRowsPastTwoToThe31) {
  double row[2] = {1.5, -2.25};
  const TensorView x = repeated_row(row, kBig, 2);
  Tensor index =
      Tensor::from_vector(std::vector<std::int64_t>{kBig - 1, 0, std::int64_t{1} << 31}, {3});
  Tensor out = Tensor::full({3, 2}, 7.0, DType::f64);
  index_select(x, 0, index, out);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1.5, -2.25, 1.5, -2.25, 1.5, -2.25}));
  // One past the last row (2^31 + 8, which a 32-bit check would see as negative or small):
  // rejected, and nothing written.
  Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{0, kBig}, {2});
  Tensor out2 = Tensor::full({2, 2}, 7.0, DType::f64);
  EXPECT_THROW(index_select(x, 0, bad, out2), IndexOutOfRange);
  EXPECT_EQ(out2.to_vector<double>(), std::vector<double>(4, 7.0));
}

TEST(LargeCpu, SegmentReduceOverMoreThanTwoToThe31Positions) {
  double v = 0.25; // every partial sum below 2^51 is exact in float64
  const TensorView x = repeated_row(&v, kBig, 1);
  const std::int64_t split = (std::int64_t{1} << 31) + 3; // the first segment alone passes 2^31
  Tensor off = Tensor::from_vector(std::vector<std::int64_t>{0, split, kBig}, {3});
  Tensor out = Tensor::full({2, 1}, 7.0, DType::f64);
  segment_reduce(x, off, out, Reduce::sum, {.level = Determinism::portable});
  EXPECT_EQ(out.to_vector<double>(),
            (std::vector<double>{0.25 * static_cast<double>(split), 1.25}));
  // The last offset must be the number of positions: one more is rejected, nothing written.
  Tensor off_bad = Tensor::from_vector(std::vector<std::int64_t>{0, split, kBig + 1}, {3});
  Tensor out2 = Tensor::full({2, 1}, 7.0, DType::f64);
  EXPECT_THROW(segment_reduce(x, off_bad, out2, Reduce::sum, {.level = Determinism::portable}),
               Error);
  EXPECT_EQ(out2.to_vector<double>(), std::vector<double>(2, 7.0));
}

} // namespace
} // namespace samebits

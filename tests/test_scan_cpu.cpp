// cumsum on the CPU: accuracy against a long-double running sum, the documented canonical order,
// bitwise determinism over repeats and thread counts, the atomic variant's order dependence,
// strided / in-place / empty inputs, NaN and -0.0, bad input.
#include "scan_reference.hpp"
#include "testing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace samebits {
namespace {

using testing::fresh_seed;

constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kPo = Determinism::portable;

// The not_guaranteed variant's bound is that of a sequential sum.
void expect_close_to_reference(const Tensor& x, int dim, const TensorView& out, Determinism level) {
  testing::expect_cumsum_close(x, dim, out, level, [](std::int64_t i) { return i + 2; });
}

class CumsumTest : public ::testing::TestWithParam<std::tuple<Shape, DType, Determinism>> {};

TEST_P(CumsumTest, MatchesLongDoubleReferenceAlongEveryDim) {
  const auto& [shape, dtype, level] = GetParam();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor x = testing::random_normal(shape, dtype, seed);
  for (int dim = 0; dim < x.ndim(); ++dim) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    Tensor out = Tensor::full(shape, 7.0, dtype);
    cumsum(x, dim, out, {.level = level});
    expect_close_to_reference(x, dim, out, level);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CumsumTest,
    ::testing::Combine(::testing::Values(Shape{1}, Shape{7}, Shape{8}, Shape{9}, Shape{257},
                                         Shape{2047}, Shape{2049}, Shape{100001}, Shape{3, 5000},
                                         Shape{9, 3, 300}, Shape{2, 20000, 3}),
                       ::testing::Values(DType::f32, DType::f64), ::testing::Values(kNg, kPo)));

// The canonical order written out from its definition: all totals first, then the formula.
template <class T> std::vector<T> naive_canonical(const std::vector<T>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  const T z = T(-0.0);
  auto chain = [&](std::int64_t b, std::int64_t e, auto&& term) {
    T s = z;
    for (auto i = b; i < e; ++i)
      s = s + term(i);
    return s;
  };
  auto seg_total = [&](std::int64_t s) {
    return chain(s * 8, std::min(n, s * 8 + 8), [&](std::int64_t i) { return x[i]; });
  };
  auto group_total = [&](std::int64_t g) {
    return chain(g * 32, std::min((n + 7) / 8, g * 32 + 32), seg_total);
  };
  auto tile_total = [&](std::int64_t k) {
    return chain(k * 8, std::min((n + 255) / 256, k * 8 + 8), group_total);
  };
  std::vector<T> out(x.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t s = i / 8, g = i / 256, k = i / 2048;
    const T r = chain(s * 8, i + 1, [&](std::int64_t j) { return x[j]; });
    const T e = chain(g * 32, s, seg_total);
    const T f = chain(k * 8, g, group_total);
    const T C = chain(0, k, tile_total);
    out[i] = ((C + f) + e) + r;
  }
  return out;
}

TEST(Cumsum, PortableFollowsTheDocumentedOrder) {
  for (std::int64_t n : {1, 5, 300, 2048, 2049, 9000}) {
    const auto seed = fresh_seed();
    Tensor x = testing::random_normal({n}, DType::f32, seed);
    Tensor out = Tensor::empty({n}, DType::f32);
    cumsum(x, 0, out, {.level = kPo});
    const auto want = naive_canonical(x.to_vector<float>());
    const auto got = out.to_vector<float>();
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
          << "n=" << n << " i=" << i << " seed " << seed;
  }
}

TEST(Cumsum, PortableBitwiseOverRepeatsAndThreadCounts) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // {20, 50000} along dim 1 walks whole lines at 1-2 threads and splits tiles at 3 and 8.
  struct Case {
    Shape shape;
    int dim;
  };
  for (const Case& c :
       {Case{{1 << 20}, 0}, Case{{20, 50000}, 1}, Case{{64, 3000}, 1}, Case{{3000, 64}, 0}}) {
    Tensor x = testing::random_normal(c.shape, DType::f32, seed);
    Tensor out = Tensor::empty(c.shape, DType::f32);
    std::set<std::uint64_t> hashes;
    for (int threads : {1, 2, 3, 8}) {
      testing::ThreadCount tc(threads);
      for (int r = 0; r < 20; ++r) {
        cumsum(x, c.dim, out, {.level = kPo});
        hashes.insert(content_hash(out));
      }
    }
    EXPECT_EQ(hashes.size(), 1u) << "shape numel " << x.numel();
  }
}

TEST(Cumsum, PortableLinesAreIndependentOfTheirNeighbours) {
  // A line of a 2-d tensor scans to the same bits as the same line on its own.
  Tensor x = testing::random_normal({5, 7000}, DType::f64, fresh_seed());
  Tensor out = Tensor::empty({5, 7000}, DType::f64);
  cumsum(x, 1, out, {.level = kPo});
  Tensor row = Tensor::copy_of(x.view().select(0, 3));
  Tensor rout = Tensor::empty({7000}, DType::f64);
  cumsum(row, 0, rout, {.level = kPo});
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(out.view().select(0, 3)), rout));
}

TEST(Cumsum, PortableColumnsEqualTheSameColumnsScannedAlone) {
  // Columns are walked in batches (many) or split into tiles (few): the same bits as a 1-d scan.
  for (const Shape& shape : {Shape{3000, 64}, Shape{5000, 3}}) {
    Tensor x = testing::random_normal(shape, DType::f32, fresh_seed());
    Tensor out = Tensor::empty(shape, DType::f32);
    cumsum(x, 0, out, {.level = kPo});
    for (std::int64_t c : {std::int64_t{0}, shape[1] - 1}) {
      Tensor col = Tensor::copy_of(x.view().select(1, c));
      Tensor cout = Tensor::empty({shape[0]}, DType::f32);
      cumsum(col, 0, cout, {.level = kPo});
      EXPECT_TRUE(bitwise_equal(Tensor::copy_of(out.view().select(1, c)), cout)) << "column " << c;
    }
  }
}

// The atomic variant cuts a line into chunks of 4096 and adds each chunk's total into the carry
// of every later chunk when its thread finishes, so a carry's bits depend on the order in which
// the chunks before it finish; threads race and that order changes from run to run. The test
// forces two orders instead of hoping for a race: one thread (chunks in ascending order) over two
// inputs whose first three chunks total 2^24, 1, 1 and 1, 1, 2^24 (exactly), then a chunk of
// 2^-12s. Chunk 3's carry is the same three numbers added in two orders: (2^24 + 1) + 1 rounds to
// 2^24 twice (ties to even), (1 + 1) + 2^24 is 2^24 + 2, and chunk 3's outputs show it.
TEST(Cumsum, AtomicVariantResultDependsOnTheOrderOfAdditions) {
  testing::ThreadCount one(1);
  constexpr std::int64_t kChunk = 4096; // the atomic variant's chunk for lines up to 64 * 4096
  for (bool big_first : {true, false}) {
    std::vector<float> x(4 * kChunk, 0x1p-12f); // a chunk of these totals 1
    const std::int64_t big = big_first ? 0 : 2; // the chunk of 4096s, totalling 2^24
    std::fill(x.begin() + big * kChunk, x.begin() + (big + 1) * kChunk, 4096.0f);
    Tensor out = Tensor::empty({4 * kChunk}, DType::f32);
    cumsum(Tensor::from_vector(x, {4 * kChunk}), 0, out,
           {.level = kNg, .variant = "cpu.atomic_carries"});
    const float want = big_first ? 0x1p24f : 0x1p24f + 2.0f; // 2^-12 more is lost in both
    EXPECT_EQ(out.data<float>()[3 * kChunk], want) << "big chunk first: " << big_first;
    EXPECT_EQ(out.data<float>()[4 * kChunk - 1], want) << "big chunk first: " << big_first;
  }
}

TEST(Cumsum, StridedInPlaceAndTransposedViewsMatchContiguous) {
  for (auto level : {kNg, kPo}) {
    Tensor x = testing::random_normal({300, 70}, DType::f64, fresh_seed());
    Tensor keep, keep_out;
    TensorView xs = testing::strided_copy(x, keep);
    for (int dim : {0, 1}) {
      Tensor want = Tensor::empty({300, 70}, DType::f64);
      cumsum(x, dim, want, {.level = kPo});
      // strided input, strided output
      TensorView os = testing::strided_copy(Tensor::full({300, 70}, 3.0, DType::f64), keep_out);
      cumsum(xs, dim, os, {.level = kPo});
      EXPECT_TRUE(bitwise_equal(Tensor::copy_of(os), want)) << "dim " << dim;
      // in place
      Tensor inplace = x.clone();
      cumsum(inplace, dim, inplace, {.level = kPo});
      EXPECT_TRUE(bitwise_equal(inplace, want)) << "dim " << dim;
      // a transposed view scans along the other dim
      Tensor t_out = Tensor::empty({70, 300}, DType::f64);
      cumsum(x.view().transpose(0, 1), 1 - dim, t_out, {.level = level});
      if (level == kPo)
        EXPECT_TRUE(bitwise_equal(Tensor::copy_of(t_out.view().transpose(0, 1)), want));
      else
        expect_close_to_reference(Tensor::copy_of(x.view().transpose(0, 1)), 1 - dim, t_out, kNg);
    }
  }
}

TEST(Cumsum, EmptyAndZeroDim) {
  for (const Shape& s : {Shape{0}, Shape{3, 0}, Shape{0, 5}}) {
    Tensor x = Tensor::empty(s, DType::f32), out = Tensor::empty(s, DType::f32);
    for (int dim = 0; dim < x.ndim(); ++dim)
      for (auto level : {kNg, kPo})
        EXPECT_NO_THROW(cumsum(x, dim, out, {.level = level}));
  }
  Tensor x = Tensor::full({}, 2.5, DType::f64), out = Tensor::full({}, 0.0, DType::f64);
  cumsum(x, 0, out, {.level = kPo});
  EXPECT_EQ(out.data<double>()[0], 2.5);
}

TEST(Cumsum, NanInfAndNegativeZero) {
  Tensor x = testing::random_normal({5000}, DType::f32, fresh_seed());
  x.data<float>()[3000] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[100] = std::numeric_limits<float>::infinity();
  Tensor out = Tensor::empty({5000}, DType::f32);
  for (auto level : {kNg, kPo}) {
    cumsum(x, 0, out, {.level = level});
    const float* o = out.data<float>();
    EXPECT_TRUE(std::isfinite(o[99]));
    EXPECT_EQ(o[100], std::numeric_limits<float>::infinity());
    EXPECT_EQ(o[2999], std::numeric_limits<float>::infinity());
    for (int i = 3000; i < 5000; ++i)
      ASSERT_TRUE(std::isnan(o[i])) << i;
  }
  Tensor z = Tensor::full({3000}, -0.0, DType::f32);
  cumsum(z, 0, out.view().slice(0, 0, 3000), {.level = kPo});
  for (int i = 0; i < 3000; ++i)
    ASSERT_TRUE(std::signbit(out.data<float>()[i])) << i;
  // Denormals are not flushed.
  const float tiny = std::numeric_limits<float>::denorm_min();
  Tensor d = Tensor::full({3000}, tiny, DType::f32);
  cumsum(d, 0, out.view().slice(0, 0, 3000), {.level = kPo});
  EXPECT_EQ(out.data<float>()[2999], 3000 * tiny);
}

TEST(Cumsum, BadInputThrowsAndLeavesOutputUntouched) {
  Tensor x = testing::random_normal({4, 10}, DType::f32, fresh_seed());
  Tensor out = Tensor::full({4, 10}, 42.0, DType::f32);
  Tensor out64 = Tensor::full({4, 10}, 42.0, DType::f64);
  Tensor out_shape = Tensor::full({10, 4}, 42.0, DType::f32);
  Tensor xi = Tensor::full({4, 10}, 1.0, DType::i64);
  EXPECT_THROW(cumsum(x, 0, out64), InvalidArgument);
  EXPECT_THROW(cumsum(x, 0, out_shape), InvalidArgument);
  EXPECT_THROW(cumsum(xi, 0, out), InvalidArgument);
  EXPECT_THROW(cumsum(x, 2, out), InvalidArgument);
  EXPECT_THROW(cumsum(x, -3, out), InvalidArgument);
  for (auto t : {out, out64, out_shape})
    for (double v : testing::to_doubles(t))
      ASSERT_EQ(v, 42.0);
  // Negative dims count from the end.
  Tensor a = Tensor::empty({4, 10}, DType::f32), b = Tensor::empty({4, 10}, DType::f32);
  cumsum(x, -1, a, {.level = kPo});
  cumsum(x, 1, b, {.level = kPo});
  EXPECT_TRUE(bitwise_equal(a, b));
}

} // namespace
} // namespace samebits

// bincount and histc on the CPU: counts and weighted sums against float64 references, the
// documented fixed-point definition bit for bit, histc's bin rule on edges, bitwise determinism
// over repeats and thread counts, the float-atomic variant's order dependence, non-finite weights,
// bad input.
#include "testing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <set>

namespace samebits {
namespace {

using testing::fresh_seed;

constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kPo = Determinism::portable;

std::vector<std::int64_t> as_int64(const TensorView& t) {
  std::vector<std::int64_t> r;
  for (double v : testing::to_doubles(t))
    r.push_back(static_cast<std::int64_t>(v));
  return r;
}

TEST(Bincount, CountsMatchReference) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType it : {DType::i32, DType::i64})
    for (std::int64_t bins : {1, 10, 1000, 200000})
      for (auto level : {kNg, kPo}) {
        Tensor idx = testing::random_index(300000, bins, it, seed);
        Tensor out = Tensor::full({bins + 3}, -1.0, DType::i64);
        bincount(idx, TensorView{}, out, {.level = level});
        std::vector<std::int64_t> ref(static_cast<std::size_t>(bins + 3), 0);
        for (auto v : as_int64(idx))
          ++ref[static_cast<std::size_t>(v)];
        EXPECT_EQ(as_int64(out), ref) << "bins " << bins;
      }
}

TEST(Bincount, StridedEmptyAndStridedOut) {
  Tensor idx = testing::random_index(5000, 50, DType::i64, fresh_seed());
  Tensor keep, keep_out;
  TensorView is = testing::strided_copy(idx, keep);
  Tensor want = Tensor::empty({50}, DType::i64);
  bincount(idx, TensorView{}, want);
  TensorView os = testing::strided_copy(Tensor::zeros({50}, DType::i64), keep_out);
  bincount(is, TensorView{}, os);
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(os), want));
  Tensor e = Tensor::empty({0}, DType::i32);
  Tensor out = Tensor::full({4}, 9.0, DType::i64);
  bincount(e, TensorView{}, out);
  EXPECT_EQ(as_int64(out), (std::vector<std::int64_t>{0, 0, 0, 0}));
  Tensor wout = Tensor::full({4}, 9.0, DType::f32);
  bincount(e, Tensor::empty({0}, DType::f32), wout, {.level = kPo});
  EXPECT_EQ(testing::to_doubles(wout), (std::vector<double>{0, 0, 0, 0}));
}

// The documented portable definition, written out directly.
template <class T>
std::vector<T> fixed_point_reference(const std::vector<std::int64_t>& idx, const std::vector<T>& w,
                                     std::int64_t bins) {
  double m = 0;
  for (T v : w)
    m = std::max(m, std::abs(static_cast<double>(v)));
  int e = 0;
  std::frexp(m, &e);
  const auto n = static_cast<std::uint64_t>(w.size());
  const int s = m > 0 ? 62 - e - static_cast<int>(std::bit_width(n - 1)) : 0;
  std::vector<std::int64_t> q(static_cast<std::size_t>(bins), 0);
  for (std::size_t i = 0; i < w.size(); ++i)
    q[static_cast<std::size_t>(idx[i])] += std::llrint(std::ldexp(static_cast<double>(w[i]), s));
  std::vector<T> r;
  for (auto v : q)
    r.push_back(static_cast<T>(std::ldexp(static_cast<double>(v), -s)));
  return r;
}

class WeightedTest : public ::testing::TestWithParam<std::tuple<std::int64_t, DType, Determinism>> {
};

TEST_P(WeightedTest, MatchesFloat64Reference) {
  const auto [bins, dtype, level] = GetParam();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 200000;
  Tensor idx = testing::random_index(n, bins, DType::i64, seed);
  Tensor w = testing::random_normal({n}, dtype, seed + 1);
  Tensor out = Tensor::full({bins}, 5.0, dtype);
  bincount(idx, w, out, {.level = level});
  const auto iv = as_int64(idx);
  const auto wv = testing::to_doubles(w);
  std::vector<long double> ref(static_cast<std::size_t>(bins), 0),
      mag(static_cast<std::size_t>(bins), 0);
  std::vector<std::int64_t> cnt(static_cast<std::size_t>(bins), 0);
  double m = 0;
  for (std::size_t i = 0; i < iv.size(); ++i) {
    ref[static_cast<std::size_t>(iv[i])] += wv[i];
    mag[static_cast<std::size_t>(iv[i])] += std::abs(wv[i]);
    ++cnt[static_cast<std::size_t>(iv[i])];
    m = std::max(m, std::abs(wv[i]));
  }
  const double u = dtype == DType::f32 ? 0x1p-24 : 0x1p-53;
  const auto o = testing::to_doubles(out);
  for (std::int64_t b = 0; b < bins; ++b) {
    const auto k = static_cast<std::size_t>(b);
    const double r = static_cast<double>(ref[k]);
    // portable: documented fixed-point bound (count * M * 2^(ceil log2 n - 63)) + two roundings;
    // not_guaranteed: a float sum of count terms.
    const double bound = level == kPo ? cnt[k] * m * 0x1p-44 + 2.01 * u * std::abs(r) + 1e-300
                                      : (cnt[k] + 1) * u * static_cast<double>(mag[k]) + 1e-300;
    ASSERT_LE(std::abs(o[k] - r), bound) << "bin " << b;
  }
  if (level == kPo) {
    if (dtype == DType::f32) {
      const auto want = fixed_point_reference<float>(iv, w.to_vector<float>(), bins);
      EXPECT_TRUE(bitwise_equal(out, Tensor::from_vector(want, {bins})));
    } else {
      const auto want = fixed_point_reference<double>(iv, w.to_vector<double>(), bins);
      EXPECT_TRUE(bitwise_equal(out, Tensor::from_vector(want, {bins})));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bins, WeightedTest,
                         ::testing::Combine(::testing::Values(1, 7, 1000, 100000),
                                            ::testing::Values(DType::f32, DType::f64),
                                            ::testing::Values(kNg, kPo)));

TEST(Bincount, PortableBitwiseOverRepeatsAndThreadCounts) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (std::int64_t bins :
       {1000, 2'000'000}) { // per-thread counters; at 8 threads 2M bins use atomics
    Tensor idx = testing::random_index(300'000, bins, DType::i32, seed);
    Tensor w = testing::random_normal({300'000}, DType::f32, seed + 1);
    Tensor out = Tensor::empty({bins}, DType::f32);
    std::set<std::uint64_t> hashes;
    for (int threads : {1, 2, 3, 8}) {
      testing::ThreadCount tc(threads);
      for (int r = 0; r < 20; ++r) {
        bincount(idx, w, out, {.level = kPo});
        hashes.insert(content_hash(out));
      }
    }
    EXPECT_EQ(hashes.size(), 1u) << "bins " << bins;
  }
}

// The float atomic variant adds each weight into its bin when a thread reaches it, so its bits
// depend on the order of the additions; threads race and that order changes from run to run. The
// test forces two orders instead of hoping for a race: one thread over the (index, weight) pairs
// as given, then reversed. Each result is bitwise the float fold in its order; the two differ.
TEST(Bincount, FloatAtomicVariantResultDependsOnTheOrderOfAdditions) {
  testing::ThreadCount one(1);
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 5000, bins = 4;
  std::mt19937_64 g(seed);
  std::vector<float> w(static_cast<std::size_t>(n));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < w.size(); ++i) { // magnitudes 2^-20 to 2^20
    w[i] = static_cast<float>(std::ldexp(std::normal_distribution<double>()(g),
                                         std::uniform_int_distribution<int>(-20, 20)(g)));
    idx[i] = std::uniform_int_distribution<std::int64_t>(0, bins - 1)(g);
  }
  auto fold = [&](bool reversed) {
    std::vector<float> acc(static_cast<std::size_t>(bins), 0.0f);
    for (std::size_t j = 0; j < w.size(); ++j) {
      const std::size_t i = reversed ? w.size() - 1 - j : j;
      acc[static_cast<std::size_t>(idx[i])] += w[i];
    }
    return acc;
  };
  for (bool reversed : {false, true}) {
    auto wi = w;
    auto ii = idx;
    if (reversed) {
      std::reverse(wi.begin(), wi.end());
      std::reverse(ii.begin(), ii.end());
    }
    Tensor out = Tensor::empty({bins}, DType::f32);
    bincount(Tensor::from_vector(ii, {n}), Tensor::from_vector(wi, {n}), out,
             {.level = kNg, .variant = "cpu.float_atomics"});
    EXPECT_EQ(out.to_vector<float>(), fold(reversed)) << "reversed " << reversed;
  }
  EXPECT_NE(fold(false), fold(true)) << "the two orders gave the same sums: draw other values";
}

TEST(Bincount, NonFiniteWeightsFollowTheDocumentedRule) {
  Tensor idx = Tensor::from_vector<std::int64_t>({0, 0, 1, 1, 2, 2, 3, 3, 4}, {9});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  Tensor w = Tensor::from_vector<float>({1, inf, inf, -inf, 2, nan, -inf, 5.0f, 3}, {9});
  Tensor out = Tensor::empty({5}, DType::f32);
  bincount(idx, w, out, {.level = kPo});
  const float* o = out.data<float>();
  EXPECT_EQ(o[0], inf);
  EXPECT_TRUE(std::isnan(o[1]));
  EXPECT_TRUE(std::isnan(o[2]));
  EXPECT_EQ(o[3], -inf);
  EXPECT_EQ(o[4], 3.0f);
}

TEST(Bincount, BadIndexThrowsAndWritesNothing) {
  for (auto level : {kNg, kPo})
    for (bool weighted : {false, true})
      for (std::int64_t bad : {-1, 10, 1000}) {
        Tensor idx = testing::random_index(100000, 10, DType::i64, fresh_seed());
        idx.data<std::int64_t>()[77777] = bad;
        idx.data<std::int64_t>()[88888] = -5;
        Tensor w = testing::random_normal({100000}, DType::f64, fresh_seed());
        Tensor out = Tensor::full({10}, 42.0, weighted ? DType::f64 : DType::i64);
        try {
          bincount(idx, weighted ? w.view() : TensorView{}, out, {.level = level});
          ADD_FAILURE() << "no throw";
        } catch (const IndexOutOfRange& e) {
          EXPECT_NE(std::string(e.what()).find("index[77777]"), std::string::npos) << e.what();
        }
        for (double v : testing::to_doubles(out))
          ASSERT_EQ(v, 42.0);
      }
  Tensor idx = testing::random_index(10, 5, DType::i64, fresh_seed());
  Tensor out = Tensor::full({5}, 42.0, DType::f32);
  EXPECT_THROW(bincount(idx, Tensor::empty({9}, DType::f32), out), InvalidArgument);  // length
  EXPECT_THROW(bincount(idx, Tensor::empty({10}, DType::f64), out), InvalidArgument); // dtype
  EXPECT_THROW(bincount(idx, TensorView{}, out), InvalidArgument); // counts need int64
  EXPECT_THROW(
      bincount(Tensor::empty({10}, DType::f32), TensorView{}, Tensor::empty({5}, DType::i64)),
      InvalidArgument);
  for (double v : testing::to_doubles(out))
    ASSERT_EQ(v, 42.0);
}

// histc's bin rule, written out in the input type.
template <class T>
std::vector<double> histc_reference(const std::vector<T>& x, T lo, T hi, std::int64_t bins) {
  std::vector<double> r(static_cast<std::size_t>(bins), 0);
  for (T v : x) {
    if (!(v >= lo && v <= hi))
      continue;
    auto b = static_cast<std::int64_t>(((v - lo) * static_cast<T>(bins)) / (hi - lo));
    r[static_cast<std::size_t>(std::min(b, bins - 1))] += 1;
  }
  return r;
}

TEST(Histc, MatchesPyTorchRuleAndFloat64Counts) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (std::int64_t bins : {1, 100, 10000, 200000})
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor x = testing::random_normal({300000}, dt, seed);
      Tensor out = Tensor::full({bins}, -1.0, dt);
      histc(x, -2.5, 3.0, out);
      std::vector<double> want;
      if (dt == DType::f32)
        want = histc_reference<float>(x.to_vector<float>(), -2.5f, 3.0f, bins);
      else
        want = histc_reference<double>(x.to_vector<double>(), -2.5, 3.0, bins);
      EXPECT_EQ(testing::to_doubles(out), want) << "bins " << bins;
      // Against exact bin arithmetic: only values within rounding of an edge may differ.
      double total = 0;
      for (double v : testing::to_doubles(out))
        total += v;
      double inside = 0;
      for (double v : testing::to_doubles(x))
        inside += (v >= -2.5 && v <= 3.0);
      EXPECT_EQ(total, inside);
    }
}

TEST(Histc, EdgesOutsideNanAndInf) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  // [0, 1] in 10 bins: 0 -> bin 0, 1 -> bin 9 (right edge inclusive), 0.3f -> bin 3 as PyTorch.
  Tensor x = Tensor::from_vector<float>(
      {0.0f, 1.0f, 0.3f, 0.5f, -0.0001f, 1.0001f, nan, inf, -inf, 0.1f}, {10});
  Tensor out = Tensor::empty({10}, DType::f32);
  histc(x, 0.0, 1.0, out);
  EXPECT_EQ(testing::to_doubles(out), (std::vector<double>{1, 1, 0, 1, 0, 1, 0, 0, 0, 1}));
}

TEST(Histc, StridedEmptyAndBitwiseOverThreads) {
  Tensor x = testing::random_uniform({500, 300}, DType::f32, -1, 1, fresh_seed());
  Tensor keep;
  TensorView xs = testing::strided_copy(x, keep);
  Tensor want = Tensor::empty({77}, DType::f32);
  histc(x, -1.0, 1.0, want);
  std::set<std::uint64_t> hashes;
  for (int threads : {1, 2, 3, 8}) {
    testing::ThreadCount tc(threads);
    for (int r = 0; r < 20; ++r) {
      Tensor out = Tensor::empty({77}, DType::f32);
      histc(r % 2 ? xs : x.view(), -1.0, 1.0, out, {.level = r % 3 ? kPo : kNg});
      hashes.insert(content_hash(out));
    }
  }
  EXPECT_EQ(hashes.size(), 1u);
  EXPECT_EQ(*hashes.begin(), content_hash(want));
  Tensor e = Tensor::empty({0, 3}, DType::f64), out = Tensor::full({3}, 9.0, DType::f64);
  histc(e, 0, 1, out);
  EXPECT_EQ(testing::to_doubles(out), (std::vector<double>{0, 0, 0}));
}

TEST(Histc, BadRangeThrowsAndWritesNothing) {
  Tensor x = testing::random_normal({100}, DType::f32, fresh_seed());
  Tensor out = Tensor::full({10}, 42.0, DType::f32);
  EXPECT_THROW(histc(x, 1.0, 1.0, out), InvalidArgument);
  EXPECT_THROW(histc(x, 2.0, 1.0, out), InvalidArgument);
  EXPECT_THROW(histc(x, std::nan(""), 1.0, out), InvalidArgument);
  EXPECT_THROW(histc(x, 0.0, std::numeric_limits<double>::infinity(), out), InvalidArgument);
  EXPECT_THROW(histc(x, 1.0, 1.0 + 1e-12, out), InvalidArgument); // equal in float32
  EXPECT_THROW(histc(x, -3e38, 3e38, out), InvalidArgument);      // width overflows float32
  EXPECT_THROW(histc(x, 0.0, 1.0, Tensor::full({10}, 42.0, DType::f64)), InvalidArgument);
  EXPECT_THROW(histc(x, 0.0, 1.0, Tensor::empty({0}, DType::f32)), InvalidArgument);
  for (double v : testing::to_doubles(out))
    ASSERT_EQ(v, 42.0);
}

} // namespace
} // namespace samebits

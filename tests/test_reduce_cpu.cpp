// sum, sum_dim and dot on the CPU: accuracy against float64, bitwise determinism over repeats and
// thread counts, the atomic variant's order dependence, the canonical order itself, bad input.
#include <algorithm>
#include <cmath>
#include <limits>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif
#include "testing.hpp"

#include <set>

namespace samebits {
namespace {

using testing::fresh_seed;

constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kPo = Determinism::portable;

double ref_sum(const std::vector<double>& v) {
  long double s = 0;
  for (double x : v)
    s += x;
  return static_cast<double>(s);
}

class SumTest : public ::testing::TestWithParam<std::tuple<std::int64_t, DType, Determinism>> {};

TEST_P(SumTest, MatchesFloat64Reference) {
  const auto [n, dtype, level] = GetParam();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor x = testing::random_normal({n}, dtype, seed);
  Tensor out = Tensor::full({1}, 123.0, dtype);
  sum(x, out, {.level = level});
  const double ref = ref_sum(testing::to_doubles(x));
  const double got = testing::to_doubles(out)[0];
  const double eps = dtype == DType::f32 ? 1e-7 : 1e-16;
  // Error bound for a tree of depth ~ 16 + log2(n): scaled by the sum of magnitudes.
  double mag = 0;
  for (double v : testing::to_doubles(x))
    mag += std::abs(v);
  EXPECT_LE(std::abs(got - ref), (40 + std::log2(n + 1.0)) * eps * mag + 1e-300)
      << got << " vs " << ref;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SumTest,
    ::testing::Combine(::testing::Values(1, 7, 255, 256, 4095, 4096, 4097, 100000, 1 << 20),
                       ::testing::Values(DType::f32, DType::f64), ::testing::Values(kNg, kPo)));

TEST(Sum, EmptyIsPositiveZero) {
  Tensor x = Tensor::empty({0}, DType::f32);
  Tensor out = Tensor::full({1}, 5.0, DType::f32);
  sum(x, out, {.level = kPo});
  EXPECT_EQ(out.data<float>()[0], 0.0f);
  EXPECT_FALSE(std::signbit(out.data<float>()[0]));
}

TEST(Sum, AllNegativeZerosGiveNegativeZero) {
  Tensor x = Tensor::full({5000}, -0.0, DType::f32);
  Tensor out = Tensor::full({1}, 5.0, DType::f32);
  sum(x, out, {.level = kPo});
  EXPECT_TRUE(std::signbit(out.data<float>()[0]));
}

TEST(Sum, NanAndInfPropagate) {
  Tensor x = testing::random_normal({10000}, DType::f32, fresh_seed());
  Tensor out = Tensor::empty({1}, DType::f32);
  x.data<float>()[1234] = std::numeric_limits<float>::infinity();
  sum(x, out, {.level = kPo});
  EXPECT_EQ(out.data<float>()[0], std::numeric_limits<float>::infinity());
  x.data<float>()[77] = -std::numeric_limits<float>::infinity();
  sum(x, out, {.level = kPo});
  EXPECT_TRUE(std::isnan(out.data<float>()[0]));
}

TEST(Sum, DenormalsAreNotFlushed) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  Tensor x = Tensor::full({3000}, tiny, DType::f32);
  Tensor out = Tensor::empty({1}, DType::f32);
  sum(x, out, {.level = kPo});
  EXPECT_EQ(out.data<float>()[0], 3000 * tiny);
}

#if defined(__x86_64__)
// Every thread of a job runs with the caller's FTZ/DAZ: with DAZ set on the calling thread alone,
// each denormal input reads as zero on whichever thread adds it, so the sum is 0 for every thread
// count. (Workers that kept their own flags added theirs into normal partial sums, which the
// caller then added up.)
TEST(Sum, WorkerThreadsTakeTheCallersDenormalMode) {
  const float tiny = std::ldexp(1.0f, -127); // denormal; two of them make a normal number
  Tensor x = Tensor::full({1 << 20}, tiny, DType::f32);
  Tensor out = Tensor::empty({1}, DType::f32);
  for (int threads : {1, 2, 4, 8}) {
    testing::ThreadCount tc(threads);
    sum(x, out, {.level = kPo}); // the pool's workers run a job with the default flags first
    ASSERT_NE(out.data<float>()[0], 0.0f);
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u); // FTZ and DAZ on this thread only
    for (int rep = 0; rep < 5; ++rep) {
      sum(x, out, {.level = kPo});
      EXPECT_EQ(out.data<float>()[0], 0.0f) << threads << " threads";
    }
    _mm_setcsr(saved);
    sum(x, out, {.level = kPo});
    EXPECT_EQ(out.data<float>()[0], static_cast<float>(1 << 20) * tiny)
        << "flags back off, on every thread";
  }
}
#endif

// The canonical order, written out naively: the tree the docs describe.
float naive_canonical(const std::vector<float>& x) {
  if (x.empty())
    return 0.0f;
  std::vector<float> level = x;
  while (true) {
    std::vector<float> next;
    for (std::size_t base = 0; base < level.size(); base += 4096) {
      float lanes[256];
      for (float& l : lanes)
        l = -0.0f;
      for (std::size_t i = base; i < std::min(level.size(), base + 4096); ++i)
        lanes[(i - base) % 256] += level[i];
      for (int s = 128; s >= 1; s /= 2)
        for (int l = 0; l < s; ++l)
          lanes[l] += lanes[l + s];
      next.push_back(lanes[0]);
    }
    if (level.size() <= 4096)
      return next[0];
    level = next;
  }
}

TEST(Sum, PortableFollowsTheDocumentedOrder) {
  for (std::int64_t n : {1, 300, 4096, 5000, 4096 * 4096 + 17}) {
    const auto seed = fresh_seed();
    Tensor x = testing::random_normal({n}, DType::f32, seed);
    Tensor out = Tensor::empty({1}, DType::f32);
    sum(x, out, {.level = kPo});
    EXPECT_EQ(out.data<float>()[0], naive_canonical(x.to_vector<float>()))
        << "n=" << n << " seed " << seed;
  }
}

TEST(Sum, PortableBitwiseOverRepeatsAndThreadCounts) {
  const auto seed = fresh_seed();
  Tensor x = testing::random_normal({3'000'000}, DType::f32, seed);
  Tensor out = Tensor::empty({1}, DType::f32);
  std::set<std::uint64_t> hashes;
  for (int threads : {1, 2, 3, 8}) {
    testing::ThreadCount tc(threads);
    for (int r = 0; r < 20; ++r) {
      sum(x, out, {.level = kPo});
      hashes.insert(content_hash(out));
    }
  }
  EXPECT_EQ(hashes.size(), 1u) << "seed " << seed;
}

// The atomic variant sums chunks of 4096 elements and adds each chunk's sum into the result when
// its thread finishes, so the bits depend on the order in which chunks finish; threads race and
// that order changes from run to run. The test forces two orders instead of hoping for a race:
// one thread (chunks in ascending order) over chunks whose sums are 2^24, 1 and 1 (exactly), then
// over the same chunks reversed. In float, (2^24 + 1) + 1 rounds to 2^24 twice (ties to even)
// while (1 + 1) + 2^24 is 2^24 + 2: the two orders must give these two results.
TEST(Sum, AtomicVariantResultDependsOnTheOrderOfAdditions) {
  testing::ThreadCount one(1);
  constexpr std::int64_t kChunk = 4096;              // kAtomicChunk in src/cpu/reduce.cpp
  std::vector<float> x(3 * kChunk, 0x1p-12f);        // chunks 1 and 2: 4096 * 2^-12 = 1 exactly
  std::fill(x.begin(), x.begin() + kChunk, 4096.0f); // chunk 0: 4096 * 4096 = 2^24
  std::vector<float> reversed(x.rbegin(), x.rend());
  Tensor out = Tensor::empty({1}, DType::f32);
  const Options atomic{.level = kNg, .variant = "cpu.atomic_chunks"};
  sum(Tensor::from_vector(x, {3 * kChunk}), out, atomic);
  EXPECT_EQ(out.data<float>()[0], 0x1p24f);
  sum(Tensor::from_vector(reversed, {3 * kChunk}), out, atomic);
  EXPECT_EQ(out.data<float>()[0], 0x1p24f + 2.0f);
  // The canonical tree gives one answer for both, whatever the thread count.
  Tensor a = Tensor::empty({1}, DType::f32), b = Tensor::empty({1}, DType::f32);
  sum(Tensor::from_vector(x, {3 * kChunk}), a, {.level = kPo});
  testing::ThreadCount four(4);
  sum(Tensor::from_vector(x, {3 * kChunk}), b, {.level = kPo});
  EXPECT_TRUE(bitwise_equal(a, b));
}

// Strided, transposed and offset inputs of sum at every level: the backend-ops harness
// (tests/test_backend_ops.cpp), bitwise against contiguous copies at portable.

TEST(SumDim, MatchesReferenceEveryDimAndStrides) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor x = testing::random_normal({5, 33, 700}, DType::f32, seed);
  Tensor keep;
  TensorView xs = testing::strided_copy(x, keep);
  for (int dim = 0; dim < 3; ++dim)
    for (auto level : {kNg, kPo})
      for (bool strided : {false, true}) {
        Shape os = x.sizes();
        os.erase(os.begin() + dim);
        Tensor out = Tensor::full(os, 9.0, DType::f32);
        sum_dim(strided ? xs : x.view(), dim, out, {.level = level});
        // float64 reference
        const auto v = testing::to_doubles(x);
        std::vector<double> ref(static_cast<std::size_t>(out.numel()), 0.0);
        const std::int64_t S0 = 5, S1 = 33, S2 = 700;
        for (std::int64_t i = 0; i < S0; ++i)
          for (std::int64_t j = 0; j < S1; ++j)
            for (std::int64_t k = 0; k < S2; ++k) {
              const double val = v[static_cast<std::size_t>((i * S1 + j) * S2 + k)];
              const std::int64_t o = dim == 0 ? j * S2 + k : dim == 1 ? i * S2 + k : i * S1 + j;
              ref[static_cast<std::size_t>(o)] += val;
            }
        EXPECT_LT(testing::relative_error(out, ref), 1e-6) << "dim " << dim;
      }
}

TEST(SumDim, PortableEqualsWholeSumOfEachSlice) {
  Tensor x = testing::random_normal({3, 10000}, DType::f32, fresh_seed());
  Tensor out = Tensor::empty({3}, DType::f32);
  sum_dim(x, 1, out, {.level = kPo});
  for (int r = 0; r < 3; ++r) {
    Tensor row = Tensor::copy_of(x.view().select(0, r));
    Tensor s = Tensor::empty({1}, DType::f32);
    sum(row, s, {.level = kPo});
    EXPECT_EQ(out.data<float>()[r], s.data<float>()[0]);
  }
}

TEST(SumDim, PortableBitwiseOverThreadCounts) {
  Tensor x = testing::random_normal({64, 20000}, DType::f32, fresh_seed());
  std::set<std::uint64_t> hashes;
  for (int threads : {1, 2, 3, 8}) {
    testing::ThreadCount tc(threads);
    for (int dim : {0, 1}) {
      Tensor out = Tensor::empty({dim == 0 ? 20000 : 64}, DType::f32);
      for (int r = 0; r < 20; ++r)
        sum_dim(x, dim, out, {.level = kPo});
      hashes.insert(content_hash(out) ^ static_cast<std::uint64_t>(dim));
    }
  }
  EXPECT_EQ(hashes.size(), 2u);
}

TEST(Dot, MatchesReferenceAndIsBitwiseStable) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor a = testing::random_normal({500000}, DType::f64, seed);
  Tensor b = testing::random_normal({500000}, DType::f64, seed + 1);
  const auto va = testing::to_doubles(a), vb = testing::to_doubles(b);
  long double ref = 0, mag = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    ref += static_cast<long double>(va[i]) * vb[i];
    mag += std::abs(va[i] * vb[i]);
  }
  std::set<std::uint64_t> hashes;
  for (int threads : {1, 2, 3, 8}) {
    testing::ThreadCount tc(threads);
    for (auto level : {kNg, kPo}) {
      Tensor out = Tensor::empty({1}, DType::f64);
      dot(a, b, out, {.level = level});
      EXPECT_NEAR(out.data<double>()[0], static_cast<double>(ref),
                  1e-13 * static_cast<double>(mag));
      if (level == kPo)
        hashes.insert(content_hash(out));
    }
  }
  EXPECT_EQ(hashes.size(), 1u);
}

TEST(ReduceErrors, BadInputThrowsAndLeavesOutputUntouched) {
  Tensor x = testing::random_normal({10}, DType::f32, fresh_seed());
  Tensor out = Tensor::full({1}, 42.0, DType::f32);
  Tensor out64 = Tensor::full({1}, 42.0, DType::f64);
  Tensor out2 = Tensor::full({2}, 42.0, DType::f32);
  Tensor xi = Tensor::full({10}, 1.0, DType::i32);
  EXPECT_THROW(sum(x, out64), InvalidArgument);
  EXPECT_THROW(sum(x, out2), InvalidArgument);
  EXPECT_THROW(sum(xi, out), InvalidArgument);
  EXPECT_THROW(sum_dim(x, 1, out), InvalidArgument);
  EXPECT_THROW(sum_dim(x, 0, out2), InvalidArgument);
  Tensor y = testing::random_normal({11}, DType::f32, fresh_seed());
  EXPECT_THROW(dot(x, y, out), InvalidArgument);
  EXPECT_EQ(out.data<float>()[0], 42.0f);
  EXPECT_EQ(out2.data<float>()[0], 42.0f);
  EXPECT_EQ(out64.data<double>()[0], 42.0);
}

} // namespace
} // namespace samebits

// Random numbers beyond the raw generator: the portable log and sin/cos, normals, integers
// without modulo bias, shuffles, generators and manual_seed, and tensor fills. Known answers are
// pinned so that any change to the bits (which would break reproducibility) shows up.
#include "samebits/random.hpp"
#include "testing.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>
#include <set>

namespace samebits {
namespace {

int ulp_distance(float a, float b) {
  const auto ia = static_cast<std::int64_t>(rng::fp::bits(a));
  const auto ib = static_cast<std::int64_t>(rng::fp::bits(b));
  return static_cast<int>(std::llabs(ia - ib));
}

TEST(PortableMath, LogIsWithinTwoUlpOfTheExactValue) {
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  int worst = 0;
  for (std::uint64_t i = 0; i < 200000; ++i) {
    // Random positive normal floats over the whole exponent range, plus the (0, 1] grid.
    const std::uint32_t w = rng::bits32(seed, 0, i);
    float x = rng::fp::from_bits(0x00800000u + w % (0x7f000000u));
    if (i % 2)
      x = static_cast<float>((w >> 8) + 1u) * 5.9604644775390625e-08f;
    const float exact = static_cast<float>(std::log(static_cast<double>(x)));
    const float got = rng::log_positive(x);
    if (exact == 0.0f) {
      EXPECT_EQ(got, 0.0f);
      continue;
    }
    // Near log(x) = 0 the absolute error matters, not ulps: two ulp, or about one float epsilon
    // of |log x| when that is wider (tiny results, whose ulps are tiny too).
    if (std::fabs(exact) < 1e-3f) {
      if (ulp_distance(got, exact) > 2) {
        EXPECT_NEAR(got, exact, 1.2e-7 * std::fabs(exact) + 1e-12) << x;
      }
      continue;
    }
    worst = std::max(worst, ulp_distance(got, exact));
    ASSERT_LE(ulp_distance(got, exact), 2) << "x = " << x;
  }
  EXPECT_EQ(rng::log_positive(1.0f), 0.0f);
  RecordProperty("worst_ulp", worst);
}

TEST(PortableMath, SinCosOfTurnsMatchLibm) {
  double worst = 0;
  for (std::uint32_t k = 0; k < (1u << 24); k += 997) {
    float s, c;
    rng::sincos_turn24(k, s, c);
    const double a = 2.0 * M_PI * static_cast<double>(k) / 16777216.0;
    worst = std::max({worst, std::fabs(s - std::sin(a)), std::fabs(c - std::cos(a))});
  }
  EXPECT_LT(worst, 3e-7);
  float s, c;
  rng::sincos_turn24(0, s, c);
  EXPECT_EQ(s, 0.0f);
  EXPECT_EQ(c, 1.0f);
  rng::sincos_turn24(1u << 22, s, c); // a quarter turn: exact
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(c, 0.0f);
}

TEST(Normal, KnownAnswers) {
  // Pinned bits: these values must never change (they would change every user's results).
  const std::uint32_t expected[8] = {
      0x3f8856dau, 0xbf514952u, 0xbf28902eu, 0x3f9101bfu,
      0xbea8419bu, 0x3ea7c2c7u, 0x3efc8bdeu, 0x3f743a4fu,
  };
  for (std::uint64_t i = 0; i < 8; ++i)
    EXPECT_EQ(rng::fp::bits(rng::normal(42, 7, i)), expected[i]) << "element " << i;
  // And against Box-Muller in float64 with libm on the same uniforms.
  for (std::uint64_t i = 0; i < 100000; ++i) {
    const auto b = rng::block(42, 7, i >> 2);
    const unsigned w = static_cast<unsigned>((i >> 1) & 1) * 2;
    const double u1 = ((b[w] >> 8) + 1.0) / 16777216.0, u2 = (b[w + 1] >> 8) / 16777216.0;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double z = (i & 1) ? r * std::sin(2 * M_PI * u2) : r * std::cos(2 * M_PI * u2);
    ASSERT_NEAR(rng::normal(42, 7, i), z, 1e-6) << i;
  }
}

TEST(Normal, DistributionSanity) {
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const int n = 400000;
  double sum = 0, sq = 0, cube = 0, quad = 0;
  int beyond2 = 0;
  float biggest = 0;
  for (int i = 0; i < n; ++i) {
    const double z = rng::normal(seed, 3, static_cast<std::uint64_t>(i));
    sum += z;
    sq += z * z;
    cube += z * z * z;
    quad += z * z * z * z;
    beyond2 += std::fabs(z) > 2.0;
    biggest = std::max(biggest, std::fabs(static_cast<float>(z)));
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.01);
  EXPECT_NEAR(cube / n, 0.0, 0.03);
  EXPECT_NEAR(quad / n, 3.0, 0.06);
  EXPECT_NEAR(static_cast<double>(beyond2) / n, 0.0455, 0.002);
  EXPECT_LE(biggest, 5.77f);
}

TEST(Integers, KnownAnswersAndRange) {
  const std::uint64_t expected[6] = {405, 897, 144, 579, 831, 50};
  for (std::uint64_t i = 0; i < 6; ++i)
    EXPECT_EQ(rng::uniform_int(42, 7, i, 1000), expected[i]);
  for (std::uint64_t i = 0; i < 10000; ++i) {
    ASSERT_LT(rng::uniform_int(1, 2, i, 7), 7u);
    ASSERT_EQ(rng::uniform_int(1, 2, i, 1), 0u);
  }
}

TEST(Integers, UniformWithoutModuloBias) {
  // A range just above 2^63 makes plain `x % range` land in the lower half twice as often as in
  // the upper half; rejection makes both halves equally likely.
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::uint64_t range = (std::uint64_t{1} << 63) + (std::uint64_t{1} << 62);
  int low = 0, n = 40000, low_modulo = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t v = rng::uniform_int(seed, 0, static_cast<std::uint64_t>(i), range);
    ASSERT_LT(v, range);
    low += v < range / 2;
    const auto b = rng::block(seed, 0, static_cast<std::uint64_t>(i));
    low_modulo += ((static_cast<std::uint64_t>(b[0]) << 32 | b[1]) % range) < range / 2;
  }
  EXPECT_NEAR(static_cast<double>(low) / n, 0.5, 0.015);
  EXPECT_GT(static_cast<double>(low_modulo) / n, 0.6); // what the rejection avoids
  // Chi-square over a small range.
  std::vector<int> counts(10, 0);
  const int m = 100000;
  for (int i = 0; i < m; ++i)
    ++counts[rng::uniform_int(seed, 9, static_cast<std::uint64_t>(i), 10)];
  double chi2 = 0;
  for (int c : counts)
    chi2 += (c - m / 10.0) * (c - m / 10.0) / (m / 10.0);
  EXPECT_LT(chi2, 27.9); // 9 degrees of freedom, p = 0.001
}

TEST(Integers, LongRejectionChainsTerminateAndStayUniform) {
  // range = 2^63 + 1 rejects almost half of all attempts: chains of 8 and more attempts (which
  // leave the element's first block) occur many times here.
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::uint64_t range = (std::uint64_t{1} << 63) + 1;
  int low = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t v = rng::uniform_int(seed, 1, static_cast<std::uint64_t>(i), range);
    ASSERT_LT(v, range);
    low += v < range / 2;
  }
  EXPECT_NEAR(static_cast<double>(low) / n, 0.5, 0.02);
}

TEST(Shuffle, PermutationKnownAnswerAndThreadIndependence) {
  const std::vector<std::int64_t> expected = {6, 5, 2, 9, 0, 8, 3, 7, 4, 1};
  EXPECT_EQ(randperm(10, 42, 7), expected);
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::int64_t n = 300000; // several parallel chunks
  std::vector<std::int64_t> first;
  for (int threads : {1, 2, 3, 8}) {
    testing::ThreadCount tc(threads);
    const auto p = randperm(n, seed, 5);
    if (first.empty()) {
      first = p;
      auto sorted = p;
      std::sort(sorted.begin(), sorted.end());
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
    } else {
      ASSERT_EQ(p, first) << threads << " threads";
    }
  }
  EXPECT_NE(randperm(n, seed, 6), first);
  EXPECT_TRUE(randperm(0, seed).empty());
  EXPECT_THROW(randperm(-1, seed), InvalidArgument);
}

TEST(Shuffle, EveryPositionEquallyLikely) {
  // Where element 0 of a 5-element shuffle ends up, over many streams.
  std::vector<int> where(5, 0);
  const int trials = 50000;
  for (int s = 0; s < trials; ++s) {
    const auto p = randperm(5, 99, static_cast<std::uint64_t>(s));
    ++where[static_cast<std::size_t>(std::find(p.begin(), p.end(), 0) - p.begin())];
  }
  double chi2 = 0;
  for (int c : where)
    chi2 += (c - trials / 5.0) * (c - trials / 5.0) / (trials / 5.0);
  EXPECT_LT(chi2, 18.5); // 4 degrees of freedom, p = 0.001
  std::vector<std::string> items = {"a", "b", "c", "d"};
  shuffle(items, 3, 4);
  const auto perm = randperm(4, 3, 4);
  const std::vector<std::string> orig = {"a", "b", "c", "d"};
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(items[i], orig[static_cast<std::size_t>(perm[i])]);
}

TEST(Generators, ManualSeedResetsEveryGeneratorAndDrawsAdvance) {
  manual_seed(1234);
  EXPECT_EQ(initial_seed(), 1234u);
  Tensor a = Tensor::empty({5}, DType::f32), b = Tensor::empty({5}, DType::f32);
  uniform_(a);
  uniform_(b);
  EXPECT_FALSE(bitwise_equal(a, b)) << "successive draws must not overlap";
  // The second draw starts at the next whole block: offset 8 (5 words rounded up to 8).
  Tensor expect_b = Tensor::empty({5}, DType::f32);
  fill_uniform(expect_b, 1234, 0, 8);
  EXPECT_TRUE(bitwise_equal(b, expect_b));
  manual_seed(1234);
  Tensor a2 = Tensor::empty({5}, DType::f32);
  uniform_(a2);
  EXPECT_TRUE(bitwise_equal(a, a2));
  // A generator for a device that exists only on paper still follows manual_seed.
  auto& g = default_generator(Device::cuda(3));
  manual_seed(77);
  EXPECT_EQ(g.state(), (Generator::State{77, 0, 0}));
  // Own generators: state save / restore.
  Generator mine(5);
  Tensor x = Tensor::empty({3, 3}, DType::f64);
  const auto saved = mine.state();
  normal_(x, 0.0, 1.0, &mine);
  mine.set_state(saved);
  Tensor y = Tensor::empty({3, 3}, DType::f64);
  normal_(y, 0.0, 1.0, &mine);
  EXPECT_TRUE(bitwise_equal(x, y));
  EXPECT_THROW(mine.set_state({1, 0, 3}), InvalidArgument);
  // A reservation returns the whole state it starts at, and moves on by whole blocks.
  mine.set_state({9, 2, 8});
  EXPECT_EQ(mine.reserve_words(5), (Generator::State{9, 2, 8}));
  EXPECT_EQ(mine.state(), (Generator::State{9, 2, 16}));
  manual_seed(kDefaultSeed);
}

TEST(Fills, MatchThePureFunctionsOnAnyLayoutAndThreadCount) {
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  const std::int64_t rows = 300, cols = 700; // > one 65536-element chunk
  for (int threads : {1, 3}) {
    testing::ThreadCount tc(threads);
    Tensor u = Tensor::empty({rows, cols}, DType::f32);
    fill_uniform(u, seed, 1, 10);
    Tensor n = Tensor::empty({rows, cols}, DType::f32);
    fill_normal(n, seed, 2, 4, 0.5, 2.0);
    Tensor d = Tensor::empty({rows, cols}, DType::f64);
    fill_uniform(d, seed, 1, 10);
    Tensor k = Tensor::empty({rows, cols}, DType::i64);
    fill_integers(k, -5, 5, seed, 3);
    Tensor bern = Tensor::empty({rows, cols}, DType::i32);
    fill_bernoulli(bern, 0.25, seed, 4);
    for (std::int64_t i = 0; i < rows * cols; i += 37) {
      const auto j = static_cast<std::uint64_t>(i);
      ASSERT_EQ(u.data<float>()[i], rng::uniform(seed, 1, 10 + j));
      ASSERT_EQ(n.data<float>()[i], 0.5f + 2.0f * rng::normal(seed, 2, 4 + j));
      ASSERT_EQ(d.data<double>()[i], rng::uniform_double(seed, 1, 10 + j));
      ASSERT_EQ(k.data<std::int64_t>()[i],
                -5 + static_cast<std::int64_t>(rng::uniform_int(seed, 3, j, 10)));
      ASSERT_EQ(bern.data<std::int32_t>()[i], rng::bernoulli(seed, 4, j, 0.25f) ? 1 : 0);
    }
    // A strided output gets the same values in row-major order.
    Tensor keep;
    TensorView strided = testing::strided_copy(Tensor::zeros({rows, cols}, DType::f32), keep);
    fill_normal(strided, seed, 2, 4, 0.5, 2.0);
    EXPECT_TRUE(bitwise_equal(strided, n));
  }
  Tensor bad = Tensor::empty({3}, DType::i32);
  EXPECT_THROW(fill_uniform(bad, 1, 1), InvalidArgument);
  EXPECT_THROW(fill_integers(bad, 5, 5, 1, 1), InvalidArgument);
  EXPECT_THROW(fill_bernoulli(bad, 1.5, 1, 1), InvalidArgument);
  Tensor empty = Tensor::empty({0}, DType::f32);
  fill_normal(empty, 1, 1);
}

} // namespace
} // namespace samebits

// trace::digest and trace::sum_hash_bytes, what samebits.torch.trace records of a CPU tensor in
// one call: the hash against the definition written out word by word (every length around the
// padding, the 4096-word rows and the pool's tasks, on 1 to 3 threads, with AVX-512, AVX2 or
// neither), the statistics against a float64 reference of the elements they sample, NaNs, strided
// views and tensors off the host.
#include "samebits/trace.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <vector>

namespace samebits {
namespace {

using testing::fresh_seed;

std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The definition of include/samebits/trace.hpp, one word at a time.
std::uint64_t sum_hash_reference(const std::vector<unsigned char>& bytes) {
  std::uint64_t h = 0;
  for (std::size_t i = 0; 8 * i < bytes.size(); ++i) {
    std::uint64_t w = 0;
    for (std::size_t b = 0; b < 8 && 8 * i + b < bytes.size(); ++b)
      w |= std::uint64_t{bytes[8 * i + b]} << (8 * b);
    const std::uint64_t m = (splitmix64(2 * (i % 4096)) | 1) * (splitmix64(2 * (i / 4096) + 1) | 1);
    h += (w ^ m) * m;
  }
  return h;
}

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> b(n);
  for (auto& x : b)
    x = static_cast<unsigned char>(rng() | 1); // never all zero bytes
  return b;
}

TEST(TraceDigest, SumHashBytesFollowsTheDefinitionForEveryLengthAndThreadCount) {
  constexpr std::size_t kRowBytes = 4096 * 8, kTaskBytes = 64 * kRowBytes;
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 17; ++n)
    lengths.push_back(n);
  for (std::size_t base : {kRowBytes, 3 * kRowBytes, kTaskBytes, 2 * kTaskBytes + 5 * kRowBytes})
    for (std::size_t d : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}})
      for (std::size_t n : {base - d, base + d})
        lengths.push_back(n);
  for (std::size_t n : lengths) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(::testing::Message() << n << " bytes, seed " << seed);
    const auto bytes = random_bytes(n, seed);
    const std::uint64_t want = sum_hash_reference(bytes);
    for (int threads : {1, 2, 3}) {
      testing::ThreadCount tc(threads);
      EXPECT_EQ(trace::sum_hash_bytes(bytes.data(), bytes.size()), want) << threads << " threads";
      // the loop over whole words for AVX2 and for the baseline instruction set, where the
      // automatic one takes AVX-512
      for (auto isa : {trace::detail::HashIsa::avx2, trace::detail::HashIsa::baseline})
        EXPECT_EQ(trace::detail::sum_hash_bytes(bytes.data(), bytes.size(), isa), want)
            << threads << " threads, instruction set " << static_cast<int>(isa);
    }
  }
}

TEST(TraceDigest, HashIsSumHashOfTheRowMajorValues) {
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64, DType::bf16, DType::f16})
    for (std::int64_t rows : {1, 3, 1001}) {
      const std::uint64_t seed = fresh_seed();
      SCOPED_TRACE(::testing::Message() << to_string(dt) << " rows " << rows << " seed " << seed);
      const Tensor t = testing::random_values({rows, 7}, dt, seed);
      const auto* p = static_cast<const unsigned char*>(t.raw());
      const std::vector<unsigned char> bytes(p, p + t.nbytes());
      EXPECT_EQ(trace::digest(t, 0).sum_hash, sum_hash_reference(bytes));
      EXPECT_EQ(trace::sum_hash(t), sum_hash_reference(bytes));
      // A strided view: the hash and the statistics of its values in row-major order.
      Tensor keep;
      const TensorView strided = testing::strided_copy(t, keep);
      ASSERT_FALSE(strided.is_contiguous());
      const auto a = trace::digest(strided, 16), b = trace::digest(t, 16);
      EXPECT_EQ(a.sum_hash, b.sum_hash);
      EXPECT_EQ(a.samples, b.samples);
      EXPECT_EQ(a.sum, b.sum);
    }
}

TEST(TraceDigest, StatisticsOfEveryStrideThElementAgainstFloat64) {
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::bf16})
    for (std::int64_t n : {1, 7, 1000, 65536, 65537, 300001})
      for (std::int64_t limit : {std::int64_t{1} << 16, std::int64_t{1000}}) {
        const std::uint64_t seed = fresh_seed();
        SCOPED_TRACE(::testing::Message()
                     << to_string(dt) << " n " << n << " limit " << limit << " seed " << seed);
        const Tensor t = testing::random_values({n}, dt, seed);
        const std::vector<double> v = testing::to_doubles(t);
        const std::int64_t stride = (n + limit - 1) / limit;
        double lo = v[0], hi = v[0], sum = 0, sq = 0;
        for (std::int64_t i = 0; i < n; i += stride) {
          lo = std::min(lo, v[static_cast<std::size_t>(i)]);
          hi = std::max(hi, v[static_cast<std::size_t>(i)]);
          sum += v[static_cast<std::size_t>(i)];
          sq += v[static_cast<std::size_t>(i)] * v[static_cast<std::size_t>(i)];
        }
        const trace::Digest d = trace::digest(t, limit);
        EXPECT_EQ(d.stride, stride);
        EXPECT_EQ(d.min, lo);
        EXPECT_EQ(d.max, hi);
        EXPECT_NEAR(d.sum, sum, 1e-12 * std::max(1.0, sq));
        EXPECT_NEAR(d.l2, std::sqrt(sq), 1e-12 * std::sqrt(sq));
        EXPECT_EQ(d.nan_count, 0);
        const std::int64_t k = std::min<std::int64_t>(trace::kSamples, n);
        ASSERT_EQ(d.samples.size(), static_cast<std::size_t>(k));
        for (std::int64_t j = 0; j < k; ++j)
          EXPECT_EQ(d.samples[static_cast<std::size_t>(j)], v[static_cast<std::size_t>(j * n / k)]);
      }
}

TEST(TraceDigest, NaNMakesTheStatisticsNaNAndIsCounted) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v(5000);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(static_cast<double>(i) + 0.5);
  v[10] = nan;
  v[4000] = nan;
  v[4001] = nan; // not on the stride of 2 below
  const Tensor t = Tensor::from_vector(v, {5000});
  const trace::Digest all = trace::digest(t, 1 << 16);
  EXPECT_EQ(all.nan_count, 3);
  EXPECT_TRUE(std::isnan(all.min) && std::isnan(all.max) && std::isnan(all.sum) &&
              std::isnan(all.l2));
  const trace::Digest half = trace::digest(t, 2500);
  EXPECT_EQ(half.stride, 2);
  EXPECT_EQ(half.nan_count, 2);
  // Infinities are values: the sum of +inf and -inf is NaN, min and max are the infinities.
  const Tensor inf = Tensor::from_vector(std::vector<float>{1.0f, INFINITY, -INFINITY}, {3});
  const trace::Digest d = trace::digest(inf, 16);
  EXPECT_EQ(d.nan_count, 0);
  EXPECT_EQ(d.min, -INFINITY);
  EXPECT_EQ(d.max, INFINITY);
  EXPECT_TRUE(std::isnan(d.sum));
}

TEST(TraceDigest, EmptyAndOffHostTensors) {
  const Tensor empty = Tensor::from_vector(std::vector<float>{}, {0, 3});
  const trace::Digest d = trace::digest(empty, 16);
  EXPECT_EQ(d.sum_hash, 0u);
  EXPECT_TRUE(d.samples.empty());
  EXPECT_EQ(d.nan_count, 0);
  // A CUDA view is refused before anything is read (its data pointer is never dereferenced).
  float host[4] = {1, 2, 3, 4};
  const TensorView v = TensorView::of(host, {4}, Device::cuda(0));
  const auto msg = testing::caught<InvalidArgument>([&] { trace::digest(v, 16); });
  ASSERT_TRUE(msg.has_value());
  EXPECT_NE(msg->find("host"), std::string::npos) << *msg;
}

} // namespace
} // namespace samebits

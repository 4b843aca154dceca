// Random fills on a CUDA device give the same bits as on the CPU: every distribution and dtype,
// many sizes (including ones that are not multiples of a Philox block or of the launch), strided
// outputs, and the per-device generators after manual_seed.
#include "samebits/random.hpp"
#include "testing.hpp"

#include <gtest/gtest.h>

namespace samebits {
namespace {

void expect_same_bits(const Tensor& cpu, const Tensor& gpu, const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda());
  const Tensor back = gpu.to(Device::cpu());
  EXPECT_TRUE(bitwise_equal(cpu, back)) << what << ": CPU hash " << hash_hex(content_hash(cpu))
                                        << ", CUDA hash " << hash_hex(content_hash(back));
}

TEST(RngGpu, FillsAreBitwiseEqualToTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  for (std::int64_t n : {1, 3, 4, 5, 255, 256, 257, 4099, 65536 * 256 + 17, 3000001}) {
    SCOPED_TRACE(n);
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor c = Tensor::empty({n}, dt), g = Tensor::empty({n}, dt, Device::cuda());
      fill_uniform(c, seed, 1, 13);
      fill_uniform(g, seed, 1, 13);
      expect_same_bits(c, g, "uniform");
      fill_normal(c, seed, 2, 5, -0.25, 3.0);
      fill_normal(g, seed, 2, 5, -0.25, 3.0);
      expect_same_bits(c, g, "normal");
      fill_bernoulli(c, 0.3, seed, 3);
      fill_bernoulli(g, 0.3, seed, 3);
      expect_same_bits(c, g, "bernoulli");
    }
    for (DType dt : {DType::i32, DType::i64}) {
      Tensor c = Tensor::empty({n}, dt), g = Tensor::empty({n}, dt, Device::cuda());
      fill_integers(c, -1000, 123457, seed, 4, 9);
      fill_integers(g, -1000, 123457, seed, 4, 9);
      expect_same_bits(c, g, "integers");
    }
    Tensor c = Tensor::empty({n}, DType::i64), g = Tensor::empty({n}, DType::i64, Device::cuda());
    const std::int64_t lo = INT64_MIN / 2, hi = INT64_MAX / 4 * 3; // rejection happens here
    fill_integers(c, lo, hi, seed, 5);
    fill_integers(g, lo, hi, seed, 5);
    expect_same_bits(c, g, "integers, wide range");
  }
}

TEST(RngGpu, StridedOutputsAndKnownAnswers) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor keep;
  const Tensor zeros = Tensor::zeros({37, 41}, DType::f32, Device::cuda());
  TensorView strided = testing::strided_copy(zeros, keep);
  fill_normal(strided, 42, 7);
  Tensor c = Tensor::empty({37, 41}, DType::f32);
  fill_normal(c, 42, 7);
  EXPECT_TRUE(bitwise_equal(strided, c));
  // The pinned CPU answers (tests/test_rng_extra.cpp) on the device.
  Tensor g = Tensor::empty({8}, DType::f32, Device::cuda());
  fill_normal(g, 42, 7);
  const auto v = g.to_vector<float>();
  const std::uint32_t expected[8] = {0x3f8856dau, 0xbf514952u, 0xbf28902eu, 0x3f9101bfu,
                                     0xbea8419bu, 0x3ea7c2c7u, 0x3efc8bdeu, 0x3f743a4fu};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(rng::fp::bits(v[static_cast<std::size_t>(i)]), expected[i]);
}

TEST(RngGpu, DeviceGeneratorsFollowManualSeed) {
  SAMEBITS_REQUIRE_CUDA();
  manual_seed(2024);
  Tensor c1 = Tensor::empty({1000}, DType::f32), c2 = Tensor::empty({10, 10}, DType::f64);
  Tensor g1 = Tensor::empty({1000}, DType::f32, Device::cuda());
  Tensor g2 = Tensor::empty({10, 10}, DType::f64, Device::cuda());
  normal_(c1);
  uniform_(c2);
  normal_(g1);
  uniform_(g2);
  expect_same_bits(c1, g1, "normal_ after manual_seed");
  expect_same_bits(c2, g2, "uniform_ after manual_seed");
  manual_seed(2024);
  Tensor g3 = Tensor::empty({1000}, DType::f32, Device::cuda());
  normal_(g3);
  EXPECT_TRUE(bitwise_equal(g1, g3));
  manual_seed(kDefaultSeed);
}

} // namespace
} // namespace samebits

// The output contract on CUDA tensors: an output that reaches an element twice, or shares memory
// with an input, is refused before any kernel writes (the checks run on the host for every
// backend); cumsum still runs in place; index_add checks its index when src has no features.
#include "testing.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace samebits {
namespace {

const Device kGpu = Device::cuda();

template <class F> std::string message_of(F&& f) {
  return testing::caught<InvalidArgument>(f).value_or("accepted");
}

TEST(OpOutputsGpu, OverlappingOutputsAreRefusedAndNothingIsWritten) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = testing::fresh_seed();
  Tensor src = testing::random_normal({8, 32}, DType::f32, seed, kGpu);
  Tensor out = testing::random_normal({16, 32}, DType::f32, seed + 1, kGpu);
  const Tensor before = out.to(Device::cpu());
  Tensor index =
      Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8}).to(kGpu);
  Tensor offsets =
      Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}, {9}).to(kGpu);
  TensorView one_row = out.view().slice(0, 0, 8);
  one_row.strides[0] = 0;
  for (auto level : {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable}) {
    const Options o{.level = level};
    EXPECT_NE(message_of([&] {
                segment_reduce(src, offsets, one_row, Reduce::sum, o);
              }).find("segment_reduce: out reaches some element twice"),
              std::string::npos);
    EXPECT_NE(message_of([&] {
                index_add(one_row, index, src, 1.0, o);
              }).find("index_add: out reaches some element twice"),
              std::string::npos);
    EXPECT_NE(message_of([&] {
                index_add(out.view().slice(0, 4, 12), index, out.view().slice(0, 0, 8), 1.0, o);
              }).find("index_add: out shares memory with src"),
              std::string::npos);
    EXPECT_EQ(
        message_of([&] { cumsum(out.view().slice(0, 0, 8), 0, out.view().slice(0, 8, 16), o); }),
        "accepted")
        << "disjoint halves of one buffer are separate tensors";
  }
  Tensor after = out.to(Device::cpu());
  // Only the accepted cumsums wrote (into rows 8..15); rows 0..7 are as they were.
  EXPECT_TRUE(bitwise_equal(after.view().slice(0, 0, 8), before.view().slice(0, 0, 8)));
}

TEST(OpOutputsGpu, IndexAddChecksItsIndexWithoutFeatures) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor out = Tensor::empty({5, 0}, DType::f32, kGpu),
         src = Tensor::empty({3, 0}, DType::f32, kGpu);
  Tensor index = Tensor::from_vector(std::vector<std::int64_t>{0, 7, 1}, {3}).to(kGpu);
  EXPECT_THROW(index_add(out, index, src, 1.0, {.level = Determinism::portable}), IndexOutOfRange);
}

TEST(OpOutputsGpu, OverlappingCopyOnTheDevice) {
  SAMEBITS_REQUIRE_CUDA();
  std::vector<float> ramp(16);
  for (int i = 0; i < 16; ++i)
    ramp[static_cast<std::size_t>(i)] = static_cast<float>(i);
  Tensor x = Tensor::from_vector(ramp, {16}).to(kGpu);
  TensorView src = x.view(), dst = x.view();
  src.shape[0] = dst.shape[0] = 3;
  src.strides[0] = dst.strides[0] = 2;
  dst.data = x.data<float>() + 2;
  copy(src, dst); // x[2], x[4], x[6] <- x[0], x[2], x[4] as they were
  const auto v = x.to_vector<float>();
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_EQ(v[4], 2.0f);
  EXPECT_EQ(v[6], 4.0f);
  // Contiguous and overlapping (a device-to-device cudaMemcpy would be undefined): both directions
  // of a shift by 3 over a million elements.
  std::vector<float> big(1 << 20);
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i);
  const auto n = static_cast<std::int64_t>(big.size());
  Tensor right = Tensor::from_vector(big, {n}).to(kGpu), left = right.clone();
  copy(right.view().slice(0, 0, n - 3), right.view().slice(0, 3, n));
  copy(left.view().slice(0, 3, n), left.view().slice(0, 0, n - 3));
  const auto r = right.to_vector<float>(), l = left.to_vector<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(r[static_cast<std::size_t>(i)], static_cast<float>(i < 3 ? i : i - 3)) << i;
    ASSERT_EQ(l[static_cast<std::size_t>(i)], static_cast<float>(i < n - 3 ? i + 3 : i)) << i;
  }
}

// Column blocks of one device buffer are separate tensors; an in-place cumsum runs on the device.
TEST(OpOutputsGpu, DisjointViewsAndInPlaceCumsum) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor buf = testing::random_normal({64, 40}, DType::f32, testing::fresh_seed(), kGpu);
  const Tensor host = buf.to(Device::cpu());
  Tensor want = Tensor::empty({64, 20}, DType::f32);
  cumsum(host.view().slice(1, 0, 20), 1, want, {.level = Determinism::portable});
  cumsum(buf.view().slice(1, 0, 20), 1, buf.view().slice(1, 20, 40),
         {.level = Determinism::portable});
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(buf.view().slice(1, 20, 40), Device::cpu()), want));
  Tensor in_place = host.to(kGpu);
  Tensor want_all = Tensor::empty({64, 40}, DType::f32);
  cumsum(host, 0, want_all, {.level = Determinism::portable});
  cumsum(in_place, 0, in_place, {.level = Determinism::portable});
  EXPECT_TRUE(bitwise_equal(in_place.to(Device::cpu()), want_all));
}

} // namespace
} // namespace samebits

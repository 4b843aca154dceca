// The distributed fixed-point conversions on CUDA: bitwise equal to the CPU loops (ties,
// out-of-range and non-finite values included, float32 and float64), and the one-rank portable
// all-reduce of a CUDA tensor through a stand-in communicator.
#include "core/backends.hpp"
#include "samebits/distributed.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace samebits {
namespace {

using testing::fresh_seed;

const Device kGpu = Device::cuda();

Tensor with_specials(DType dt, std::uint64_t seed) {
  Tensor x = testing::random_normal({4099}, dt, seed);
  const double specials[] = {
      2.5,          -3.5,   0x1p49, -0x1p51, std::numeric_limits<double>::infinity(),
      std::nan(""), 1e-300, -0.0};
  for (int i = 0; i < 8; ++i) {
    if (dt == DType::f32)
      x.data<float>()[i * 97] = static_cast<float>(specials[i]);
    else
      x.data<double>()[i * 97] = specials[i];
  }
  return x;
}

TEST(DistributedGpu, ConversionsAreBitwiseEqualToTheCpu) {
  if (detail::cuda_device_count() == 0)
    GTEST_SKIP() << "needs a CUDA device";
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = with_specials(dt, seed);
    for (int s : {0, 20, 40}) {
      Tensor qc = Tensor::full({x.numel()}, 5.0, DType::i64), fc = Tensor::zeros({1}, DType::i64);
      Tensor qg = qc.to(kGpu), fg = fc.to(kGpu), xg = x.to(kGpu);
      to_fixed(x, s, qc, fc, true);
      to_fixed(xg, s, qg, fg, true);
      EXPECT_EQ(qc.to_vector<std::int64_t>(), qg.to_vector<std::int64_t>());
      EXPECT_EQ(fc.to_vector<std::int64_t>(), fg.to_vector<std::int64_t>());
      EXPECT_GE(fc.to_vector<std::int64_t>()[0], 3); // 2^51 at s >= 0, inf, NaN
      for (std::int64_t d : {1, 3, 12}) {
        Tensor oc = Tensor::empty({x.numel()}, dt), og = Tensor::empty({x.numel()}, dt, kGpu);
        from_fixed(qc, s, d, oc);
        from_fixed(qg, s, d, og);
        Tensor back = og.to(Device::cpu());
        EXPECT_EQ(std::memcmp(oc.raw(), back.raw(), oc.nbytes()), 0) << "s " << s << " d " << d;
      }
    }
    Tensor mc = Tensor::empty({1}, DType::f64), mg = Tensor::empty({1}, DType::f64, kGpu);
    max_abs_finite(x, mc);
    max_abs_finite(x.to(kGpu), mg);
    EXPECT_EQ(mc.to_vector<double>(), mg.to_vector<double>());
  }
}

} // namespace
} // namespace samebits

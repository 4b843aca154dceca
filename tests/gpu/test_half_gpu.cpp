// bfloat16/float16 on CUDA: the device conversions bit for bit equal to the host's (every 16-bit
// pattern, ties and random floats), and every op with half support: within the float64 bound at
// every level, bitwise over repeats at run_to_run/portable, and portable CUDA bitwise equal to
// portable CPU. index_add (the MoE token combine) also on a larger shape, on both kernel paths
// (16-byte rows and odd feature counts), with a plan, with automatic plan reuse, and with a bad
// index that must leave out untouched.
#include "half_cases.hpp"
#include "samebits/random.hpp"

#include <bit>
#include <cstring>
#include <random>

namespace samebits {
namespace {

const Device kGpu = Device::cuda();
constexpr Determinism kPo = Determinism::portable;

// Converts on the device and brings the result back.
Tensor convert_on_gpu(const Tensor& host_src, DType to) {
  Tensor out = Tensor::empty(host_src.sizes(), to, kGpu);
  convert(host_src.to(kGpu), out);
  return out.to(Device::cpu());
}

TEST(HalfGpu, DeviceConversionsAreTheHostsBits) {
  SAMEBITS_REQUIRE_CUDA();
  std::vector<std::uint16_t> patterns(65536);
  for (std::uint32_t b = 0; b < 65536; ++b)
    patterns[b] = static_cast<std::uint16_t>(b);
  std::mt19937 gen(static_cast<std::uint32_t>(testing::fresh_seed()));
  std::vector<float> floats;
  for (int i = 0; i < 1 << 20; ++i)
    floats.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(gen())));
  for (std::uint32_t b = 0; b < 65536; ++b) { // ties of both formats and their neighbours
    const float t1 = std::bit_cast<float>((b << 16) | 0x8000u);
    const float t2 = std::bit_cast<float>((0x33000000u + (b << 13)) | 0x1000u);
    floats.insert(floats.end(), {t1, std::nextafter(t1, 0.0f), t2, std::nextafter(t2, 0.0f)});
  }
  const auto n = static_cast<std::int64_t>(floats.size());
  const Tensor f = Tensor::from_vector(floats, {n});
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    // Every pattern to float32 (and to float64) on the device and on the host.
    Tensor h = Tensor::empty({65536}, dt);
    std::memcpy(h.raw(), patterns.data(), 65536 * 2);
    for (DType wide : {DType::f32, DType::f64}) {
      Tensor on_host = Tensor::empty({65536}, wide);
      convert(h, on_host);
      const Tensor on_gpu = convert_on_gpu(h, wide);
      if (wide == DType::f32) { // integer code on both sides: NaNs included
        EXPECT_TRUE(bitwise_equal(on_gpu, on_host));
        continue;
      }
      // float32 -> float64 of a NaN is the hardware's: compare the other values bit for bit.
      const auto a = on_host.to_vector<double>(), b = on_gpu.to_vector<double>();
      std::int64_t wrong = 0;
      for (std::size_t i = 0; i < a.size(); ++i)
        wrong += !std::isnan(a[i]) &&
                 std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i]);
      EXPECT_EQ(wrong, 0);
    }
    // Float32 and float64 to the half format.
    Tensor on_host = Tensor::empty({n}, dt);
    convert(f, on_host);
    EXPECT_TRUE(bitwise_equal(convert_on_gpu(f, dt), on_host));
    Tensor d = Tensor::empty({n}, DType::f64);
    convert(f, d);
    auto dv = d.to_vector<double>();
    for (auto& x : dv)
      x = x * (1.0 + 0x1p-30); // values between floats: the float64 path rounds once
    const Tensor d2 = Tensor::from_vector(dv, {n});
    Tensor on_host2 = Tensor::empty({n}, dt);
    convert(d2, on_host2);
    // NaN payloads from float64 may differ (device float64 -> float32 truncation); compare the
    // non-NaN values bit for bit.
    const Tensor on_gpu2 = convert_on_gpu(d2, dt);
    const auto* a = static_cast<const std::uint16_t*>(on_host2.raw());
    const auto* b = static_cast<const std::uint16_t*>(on_gpu2.raw());
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < n; ++i)
      wrong += !std::isnan(dv[static_cast<std::size_t>(i)]) && a[i] != b[i];
    EXPECT_EQ(wrong, 0);
  }
  // Random fills: the same bits on both devices.
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor c = Tensor::empty({4096}, dt), g = Tensor::empty({4096}, dt, kGpu);
    fill_normal(c, 7, 1);
    fill_normal(g, 7, 1);
    EXPECT_TRUE(bitwise_equal(c, g));
  }
}

class HalfOpsGpu : public ::testing::TestWithParam<testing::HalfCase> {};

TEST_P(HalfOpsGpu, BoundRepeatsAndPortableEqualsTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const testing::HalfCase& c = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(c.name + " " + std::string(to_string(dt)) + " seed " + std::to_string(seed));
    for (Determinism level : {Determinism::not_guaranteed, Determinism::run_to_run, kPo}) {
      const Options o{.level = level};
      const auto r = c.run(dt, kGpu, o, seed);
      // index_add at not_guaranteed adds with 16-bit atomics: each add rounds to the dtype.
      const bool atomic16 = level == Determinism::not_guaranteed && c.name.starts_with("index_add");
      testing::expect_within_bound(r, dt, c.name + " at " + std::string(to_string(level)),
                                   atomic16 ? (dt == DType::bf16 ? 0x1p-8 : 0x1p-11) : 0x1p-24);
      if (level == Determinism::not_guaranteed)
        continue;
      for (int rep = 0; rep < 3; ++rep)
        EXPECT_TRUE(bitwise_equal(c.run(dt, kGpu, o, seed).out, r.out)) << to_string(level);
      if (level == kPo) {
        EXPECT_TRUE(bitwise_equal(c.run(dt, Device::cpu(), o, seed).out, r.out))
            << "portable CUDA differs from portable CPU";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, HalfOpsGpu, ::testing::ValuesIn(testing::half_cases()),
                         [](const auto& info) { return info.param.name; });

// index_add into tokens: rows of F features from n expert outputs into m tokens, every path.
TEST(HalfGpu, IndexAddCombineShapesMatchTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  struct Shape3 {
    std::int64_t n, m, f;
  };
  for (const Shape3 s : {Shape3{16384, 8192, 512}, Shape3{5000, 3000, 37}, Shape3{4096, 7, 64}})
    for (DType dt : {DType::bf16, DType::f16})
      for (double alpha : {1.0, 0.75}) {
        SCOPED_TRACE(std::to_string(s.f) + " features, " + std::string(to_string(dt)));
        const Tensor src = testing::half_normal({s.n, s.f}, dt, seed);
        const Tensor out0 = testing::half_normal({s.m, s.f}, dt, seed + 1);
        const Tensor idx = testing::random_index(s.n, s.m, DType::i64, seed + 2);
        Tensor cpu = out0.clone();
        index_add(cpu, idx, src, alpha, {.level = kPo});
        const Tensor gs = src.to(kGpu), gi = idx.to(kGpu);
        Tensor gpu = out0.to(kGpu);
        index_add(gpu, gi, gs, alpha, {.level = kPo});
        EXPECT_TRUE(bitwise_equal(gpu, cpu)) << "sort_pull";
        EXPECT_NE(last_explain().find("cuda.half_sort_pull"), std::string::npos) << last_explain();
        Tensor planned = out0.to(kGpu);
        index_add(planned, make_index_plan(gi, s.m), gs, alpha, {.level = kPo});
        EXPECT_TRUE(bitwise_equal(planned, cpu)) << "plan_pull";
        Tensor again = out0.to(kGpu); // the same index again: a kept plan may serve it
        index_add(again, gi, gs, alpha, {.level = Determinism::run_to_run});
        EXPECT_TRUE(bitwise_equal(again, cpu)) << "run_to_run";
        Tensor atomic = out0.to(kGpu);
        index_add(atomic, gi, gs, alpha, {.level = Determinism::not_guaranteed});
        EXPECT_NE(last_explain().find("cuda.half_atomic"), std::string::npos) << last_explain();
        // The atomic rounds every add to the dtype: close, not equal (checked where targets get
        // a few rows each; 4096 rows into 7 targets round 600 times).
        if (s.m >= 1000) {
          const auto a = testing::to_doubles(atomic), b = testing::to_doubles(cpu);
          double worst = 0;
          for (std::size_t i = 0; i < a.size(); ++i)
            worst = std::max(worst, std::fabs(a[i] - b[i]));
          EXPECT_LT(worst, 0.5);
        }
      }
}

TEST(HalfGpu, BadIndexLeavesOutUntouched) {
  SAMEBITS_REQUIRE_CUDA();
  const Tensor src = testing::half_normal({100, 16}, DType::bf16, testing::fresh_seed());
  std::vector<std::int64_t> iv(100, 3);
  iv[57] = 40;
  const Tensor idx = Tensor::from_vector(iv, {100}, kGpu);
  for (Determinism level : {Determinism::not_guaranteed, kPo}) {
    Tensor out = testing::half_normal({20, 16}, DType::bf16, 5).to(kGpu);
    const Tensor before = out.clone();
    EXPECT_THROW(index_add(out, idx, src.to(kGpu), 1.0, {.level = level}), IndexOutOfRange);
    EXPECT_TRUE(bitwise_equal(out, before)) << to_string(level);
  }
}

} // namespace
} // namespace samebits

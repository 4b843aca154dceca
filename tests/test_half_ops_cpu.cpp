// bfloat16/float16 ops on the CPU: every op with half support, at every level, against a float64
// reference (float32 accumulation plus one final rounding), and bitwise over repeats and thread
// counts at run_to_run and portable. The cases live in half_cases.hpp (the GPU test reuses them).
#include "half_cases.hpp"

namespace samebits {
namespace {

using testing::HalfCase;

class HalfOpsCpu : public ::testing::TestWithParam<HalfCase> {};

TEST_P(HalfOpsCpu, WithinTheBoundAtEveryLevelAndRepeatable) {
  const HalfCase& c = GetParam();
  for (DType dt : {DType::bf16, DType::f16}) {
    const std::uint64_t seed = testing::fresh_seed();
    SCOPED_TRACE(c.name + " " + std::string(to_string(dt)) + " seed " + std::to_string(seed));
    for (Determinism level :
         {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable}) {
      const Options o{.level = level};
      const auto r = c.run(dt, Device::cpu(), o, seed);
      ASSERT_EQ(r.out.dtype(), dt);
      testing::expect_within_bound(r, dt, c.name + " at " + std::string(to_string(level)));
      if (level == Determinism::not_guaranteed)
        continue;
      for (int threads : {1, 3}) {
        const testing::ThreadCount tc(threads);
        EXPECT_TRUE(bitwise_equal(c.run(dt, Device::cpu(), o, seed).out, r.out))
            << c.name << " at " << to_string(level) << " with " << threads << " threads";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, HalfOpsCpu, ::testing::ValuesIn(testing::half_cases()),
                         [](const auto& info) { return info.param.name; });

// The half result is the float32 op's result on the same values, rounded once.
TEST(HalfOpsCpu, IndexAddIsTheFloat32ChainRoundedOnce) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  for (DType dt : {DType::bf16, DType::f16}) {
    const Tensor src = testing::half_normal({500, 16}, dt, seed);
    const Tensor out0 = testing::half_normal({64, 16}, dt, seed + 1);
    const Tensor idx = testing::random_index(500, 64, DType::i32, seed + 2);
    Tensor out = out0.clone();
    index_add(out, idx, src, 1.0, {.level = Determinism::portable});
    Tensor sf = Tensor::empty({500, 16}, DType::f32), of = Tensor::empty({64, 16}, DType::f32);
    convert(src, sf);
    convert(out0, of);
    index_add(of, idx, sf, 1.0, {.level = Determinism::portable});
    Tensor want = Tensor::empty({64, 16}, dt);
    convert(of, want);
    EXPECT_TRUE(bitwise_equal(out, want));
  }
}

// gemm on half tensors is the float32 gemm of their exact float32 copies, each output rounded
// once, for both transposes and the alpha/beta rules (c's old value read only when beta != 0).
TEST(HalfOpsCpu, GemmIsTheFloat32GemmRoundedOnce) {
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(seed);
  for (DType dt : {DType::bf16, DType::f16})
    for (Transpose ta : {Transpose::no, Transpose::yes})
      for (Transpose tb : {Transpose::no, Transpose::yes})
        for (const auto& [alpha, beta] :
             {std::pair{1.0, 0.0}, {0.3, 1.0}, {-2.0, 0.7}, {0.0, 0.5}}) {
          const std::int64_t m = 19, n = 23, k = 300;
          const Tensor a = ta == Transpose::yes ? testing::half_normal({k, m}, dt, seed)
                                                : testing::half_normal({m, k}, dt, seed);
          const Tensor b = tb == Transpose::yes ? testing::half_normal({n, k}, dt, seed + 1)
                                                : testing::half_normal({k, n}, dt, seed + 1);
          Tensor c = testing::half_normal({m, n}, dt, seed + 2);
          const auto to_f32 = [](const Tensor& h) {
            Tensor f = Tensor::empty(h.sizes(), DType::f32);
            convert(h, f);
            return f;
          };
          Tensor cf = to_f32(c);
          if (beta == 0)
            fill(c, std::nan("")); // never read
          gemm(ta, tb, alpha, a, b, beta, c, {.level = Determinism::portable});
          gemm(ta, tb, alpha, to_f32(a), to_f32(b), beta, cf, {.level = Determinism::portable});
          Tensor want = Tensor::empty({m, n}, dt);
          convert(cf, want);
          EXPECT_TRUE(bitwise_equal(c, want))
              << to_string(dt) << " alpha " << alpha << " beta " << beta;
        }
}

TEST(HalfOpsCpu, OpsWithoutHalfSupportSaySo) {
  const Tensor x = Tensor::zeros({4, 4}, DType::bf16);
  Tensor out = Tensor::zeros({4}, DType::bf16);
  EXPECT_THROW(histc(x, 0, 1, out), InvalidArgument);
  EXPECT_THROW(index_add(out, Tensor::zeros({4}, DType::i64), Tensor::zeros({4}, DType::f16)),
               InvalidArgument); // mixed half dtypes
}

} // namespace
} // namespace samebits

// sum, sum_dim and dot on CUDA: accuracy against float64, the portable variant bitwise equal to
// the CPU's on fresh inputs of many sizes under two launch configurations, run_to_run repeats,
// the atomic variant's nondeterminism, special values, strided and misaligned inputs.
#include "ops/reduce_choice.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>

namespace samebits {
namespace {

using testing::fresh_seed;

constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kRr = Determinism::run_to_run;
constexpr Determinism kPo = Determinism::portable;
const Device kGpu = Device::cuda();

// Sets the reduce family's launch tuning (ops/reduce_choice.hpp) for its lifetime.
class LaunchConfig {
public:
  LaunchConfig(int block, std::int64_t grid) : guard_({.block = block, .grid = grid}) {}

private:
  detail::TuningGuard<detail::ReduceTuning> guard_;
};

// The launch configurations every portable result must be identical under: the default, small
// blocks with a tiny grid (many chunks per warp, grid-stride loops), and the largest blocks.
struct Config {
  const char* name;
  int block;
  std::int64_t grid;
};
const Config kConfigs[] = {
    {"default", 0, 0}, {"block 64, grid 5", 64, 5}, {"block 256, grid 3", 256, 3}};

// Same bits, or both NaN (NaN payloads are not part of the contract: CUDA produces the canonical
// NaN where the CPU keeps an operand's payload).
bool same_value(double a, double b) {
  if (std::isnan(a) && std::isnan(b))
    return true;
  std::uint64_t ua, ub;
  std::memcpy(&ua, &a, 8);
  std::memcpy(&ub, &b, 8);
  return ua == ub; // float32 values widen exactly, so this compares their bits too
}

// Index of the first element where a and b differ (same_value), or -1.
std::int64_t first_difference(const TensorView& a, const TensorView& b) {
  const auto va = testing::to_doubles(a), vb = testing::to_doubles(b);
  if (va.size() != vb.size())
    return 0;
  for (std::size_t i = 0; i < va.size(); ++i)
    if (!same_value(va[i], vb[i]))
      return static_cast<std::int64_t>(i);
  return -1;
}

Tensor cpu_sum(const TensorView& x) {
  Tensor out = Tensor::empty({1}, x.dtype);
  sum(Tensor::copy_of(x, Device::cpu()), out, {.level = kPo});
  return out;
}

Tensor gpu_sum(const TensorView& x, Determinism level) {
  Tensor out = Tensor::full({1}, 123.0, x.dtype, kGpu);
  sum(x, out, {.level = level});
  return out;
}

double bound(DType dtype, std::int64_t n, double magnitude) {
  const double eps = dtype == DType::f32 ? 1e-7 : 1e-16;
  return (40 + std::log2(n + 1.0)) * eps * magnitude + 1e-300;
}

class SumGpu : public ::testing::TestWithParam<std::tuple<std::int64_t, DType>> {};

TEST_P(SumGpu, EveryVariantMatchesFloat64AndPortableEqualsCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto [n, dtype] = GetParam();
  if (!testing::within_work_limit(n))
    GTEST_SKIP() << "above SAMEBITS_TEST_WORK_LIMIT";
  const auto seed = fresh_seed();
  SCOPED_TRACE("n " + std::to_string(n) + " seed " + std::to_string(seed));
  Tensor h = testing::random_normal({n}, dtype, seed);
  Tensor x = h.to(kGpu);
  const auto v = testing::to_doubles(h);
  long double ref = 0;
  double mag = 0;
  for (double e : v) {
    ref += e;
    mag += std::abs(e);
  }
  for (auto level : {kNg, kRr, kPo}) {
    const double got = testing::to_doubles(gpu_sum(x, level))[0];
    EXPECT_LE(std::abs(got - static_cast<double>(ref)), bound(dtype, n, mag))
        << "level " << to_string(level);
  }
  const Tensor want = cpu_sum(h);
  for (const auto& c : kConfigs) {
    LaunchConfig lc(c.block, c.grid);
    EXPECT_EQ(first_difference(gpu_sum(x, kPo), want), -1) << c.name;
  }
  // A view that starts one element in: not 16-byte aligned, so the element-load path runs.
  if (n > 1) {
    const TensorView shifted = x.view().slice(0, 1, n);
    EXPECT_EQ(first_difference(gpu_sum(shifted, kPo), cpu_sum(h.view().slice(0, 1, n))), -1);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SumGpu,
                         ::testing::Combine(::testing::Values(1, 2, 255, 256, 4095, 4096, 4097,
                                                              8192, 65537, 1000003, (1 << 24) + 5),
                                            ::testing::Values(DType::f32, DType::f64)));

TEST(SumGpu, ManyRandomSizesBitwiseEqualToCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> size(1, 300000);
  for (int t = 0; t < 12; ++t) {
    const std::int64_t n = size(gen);
    const DType dtype = t % 2 ? DType::f64 : DType::f32;
    Tensor h = testing::random_normal({n}, dtype, seed + static_cast<std::uint64_t>(t));
    EXPECT_EQ(first_difference(gpu_sum(h.to(kGpu), kPo), cpu_sum(h)), -1) << "n " << n;
  }
}

TEST(SumGpu, StridedInputEqualsCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor h = testing::random_normal({300, 70}, dtype, seed);
    Tensor x = h.to(kGpu), keep;
    const TensorView xs = testing::strided_copy(x, keep); // NaN in the gaps
    ASSERT_FALSE(xs.is_contiguous());
    for (auto level : {kNg, kPo}) {
      const Tensor got = gpu_sum(xs, level);
      if (level == kPo) {
        EXPECT_EQ(first_difference(got, cpu_sum(h)), -1);
      } else {
        EXPECT_FALSE(std::isnan(testing::to_doubles(got)[0]));
      }
    }
    const Tensor t = gpu_sum(x.view().transpose(0, 1), kPo); // row-major order of the transpose
    EXPECT_EQ(first_difference(t, cpu_sum(h.view().transpose(0, 1))), -1);
  }
}

TEST(SumGpu, EmptyIsPositiveZeroAndSpecialValuesMatchCpu) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor empty = Tensor::empty({0}, DType::f32, kGpu);
  for (auto level : {kNg, kPo}) {
    const float e = gpu_sum(empty, level).to_vector<float>()[0];
    EXPECT_EQ(e, 0.0f);
    EXPECT_FALSE(std::signbit(e));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float tiny = std::numeric_limits<float>::denorm_min();
  const auto seed = fresh_seed();
  for (std::int64_t n : {5000, 70000}) {
    Tensor h = testing::random_normal({n}, DType::f32, seed);
    float* p = h.data<float>();
    std::vector<std::function<void()>> cases = {
        [&] { p[n / 3] = inf; },       // +inf
        [&] { p[n / 2] = -inf; },      // +inf + -inf = NaN
        [&] { p[7] = std::nanf(""); }, // NaN
        [&] {
          for (std::int64_t i = 0; i < n; ++i)
            p[i] = tiny * static_cast<float>(i % 5);
        }, // denormals
        [&] {
          for (std::int64_t i = 0; i < n; ++i)
            p[i] = -0.0f;
        }, // all -0.0: result -0.0
        [&] { EXPECT_TRUE(std::signbit(gpu_sum(h.to(kGpu), kPo).to_vector<float>()[0])); },
        [&] {
          for (std::int64_t i = 0; i < n; ++i)
            p[i] = (i % 2 ? -1.0f : 1.0f) * 3e38f;
        }, // overflow
    };
    for (std::size_t k = 0; k < cases.size(); ++k) {
      cases[k]();
      const Tensor want = cpu_sum(h);
      EXPECT_EQ(first_difference(gpu_sum(h.to(kGpu), kPo), want), -1) << "case " << k << " n " << n;
    }
  }
  Tensor dn = Tensor::full({3000}, static_cast<double>(tiny), DType::f32, kGpu);
  EXPECT_EQ(gpu_sum(dn, kPo).to_vector<float>()[0], 3000 * tiny); // not flushed to zero
}

TEST(SumGpu, PortableAndRunToRunBitwiseOver100Repeats) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor x = testing::random_normal({(1 << 22) + 3}, DType::f32, seed, kGpu);
  Tensor out = Tensor::empty({1}, DType::f32, kGpu);
  for (auto level : {kRr, kPo}) {
    std::set<std::uint64_t> hashes;
    for (int r = 0; r < 100; ++r) {
      sum(x, out, {.level = level});
      hashes.insert(content_hash(out));
    }
    EXPECT_EQ(hashes.size(), 1u) << "seed " << seed << " level " << to_string(level);
    EXPECT_NE(last_explain().find("cuda.canonical_tree"), std::string::npos) << last_explain();
  }
}

TEST(SumGpu, AtomicVariantVariesRunToRun) {
  SAMEBITS_REQUIRE_CUDA();
  // Documents the problem: chunk sums are added with atomicAdd in the order warps finish. On
  // 2^24 elements (4096 chunk sums into one value) a second result appears within a few runs.
  Tensor x = testing::random_normal({1 << 24}, DType::f32, fresh_seed(), kGpu);
  Tensor out = Tensor::empty({1}, DType::f32, kGpu);
  std::set<std::uint64_t> hashes;
  int runs = 0;
  for (; runs < 200 && hashes.size() < 2; ++runs) {
    sum(x, out, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_NE(last_explain().find("cuda.atomic_chunks"), std::string::npos) << last_explain();
  EXPECT_GE(hashes.size(), 2u) << "after " << runs << " runs";
}

// --- sum_dim ----------------------------------------------------------------------------------

// float64 reference of sum_dim over a contiguous CPU tensor of up to 3 dims.
std::vector<double> ref_sum_dim(const Tensor& h, int dim) {
  Shape s = h.sizes();
  while (s.size() < 3)
    s.insert(s.begin(), 1);
  const int d = dim + (3 - h.ndim());
  const auto v = testing::to_doubles(h);
  Shape os = s;
  os.erase(os.begin() + d);
  std::vector<double> ref(static_cast<std::size_t>(os[0] * os[1]), 0.0);
  for (std::int64_t i = 0; i < s[0]; ++i)
    for (std::int64_t j = 0; j < s[1]; ++j)
      for (std::int64_t k = 0; k < s[2]; ++k) {
        const double val = v[static_cast<std::size_t>((i * s[1] + j) * s[2] + k)];
        const std::int64_t o = d == 0 ? j * s[2] + k : d == 1 ? i * s[2] + k : i * s[1] + j;
        ref[static_cast<std::size_t>(o)] += val;
      }
  return ref;
}

TEST(SumDimGpu, EveryDimContiguousStridedTransposedEqualsCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Shape shapes[] = {{5, 33, 700}, {3, 9001},    {3, 12288}, {9000, 40},
                          {4097, 3},    {2, 5000, 7}, {1, 1},     {17}};
  for (DType dtype : {DType::f32, DType::f64})
    for (const auto& shape : shapes) {
      Tensor h = testing::random_normal(shape, dtype, seed);
      Tensor x = h.to(kGpu), keep;
      const TensorView xs = testing::strided_copy(x, keep);
      for (int dim = 0; dim < h.ndim(); ++dim) {
        Shape os = h.sizes();
        os.erase(os.begin() + dim);
        Tensor want = Tensor::empty(os, dtype);
        sum_dim(h, dim, want, {.level = kPo});
        const auto ref = ref_sum_dim(h, dim);
        const std::string where = h.view().describe() + " dim " + std::to_string(dim);
        for (bool strided : {false, true})
          for (auto level : {kNg, kPo}) {
            const TensorView in = strided ? xs : x.view();
            Tensor out = Tensor::full(os, 9.0, dtype, kGpu);
            sum_dim(in, dim, out, {.level = level});
            EXPECT_LT(testing::relative_error(out, ref), dtype == DType::f32 ? 1e-5 : 1e-13)
                << where << (strided ? " strided" : "") << " " << to_string(level);
            if (level != kPo)
              continue;
            for (const auto& c : kConfigs) {
              LaunchConfig lc(c.block, c.grid);
              Tensor o2 = Tensor::full(os, 9.0, dtype, kGpu);
              sum_dim(in, dim, o2, {.level = kPo});
              EXPECT_EQ(first_difference(o2, want), -1)
                  << where << (strided ? " strided " : " ") << c.name;
            }
          }
      }
      if (h.ndim() >= 2) { // a transposed view: the reduced dim's stride is 1 for dim 0
        const TensorView t = x.view().transpose(0, h.ndim() - 1);
        const TensorView ht = h.view().transpose(0, h.ndim() - 1);
        for (int dim = 0; dim < t.ndim; ++dim) {
          Shape os = t.sizes();
          os.erase(os.begin() + dim);
          Tensor want = Tensor::empty(os, dtype), out = Tensor::empty(os, dtype, kGpu);
          sum_dim(ht, dim, want, {.level = kPo});
          sum_dim(t, dim, out, {.level = kPo});
          EXPECT_EQ(first_difference(out, want), -1)
              << "transposed " << t.describe() << " dim " << dim;
        }
      }
    }
}

TEST(SumDimGpu, StridedOutputAndEmptyDims) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor h = testing::random_normal({6, 5000}, DType::f32, seed);
  Tensor big = Tensor::full({6, 2}, 5.0, DType::f32, kGpu);
  const TensorView out = big.view().select(1, 1); // stride 2
  sum_dim(h.to(kGpu), 1, out, {.level = kPo});
  Tensor want = Tensor::empty({6}, DType::f32);
  sum_dim(h, 1, want, {.level = kPo});
  EXPECT_EQ(first_difference(out, want), -1) << "seed " << seed;
  EXPECT_EQ(testing::to_doubles(big.view().select(1, 0)), std::vector<double>(6, 5.0)); // untouched

  Tensor zero_len = Tensor::empty({4, 0}, DType::f64, kGpu);
  for (auto level : {kNg, kPo}) {
    Tensor o = Tensor::full({4}, 7.0, DType::f64, kGpu);
    sum_dim(zero_len, 1, o, {.level = level});
    for (double v : testing::to_doubles(o)) {
      EXPECT_EQ(v, 0.0);
      EXPECT_FALSE(std::signbit(v));
    }
    Tensor none = Tensor::empty({0}, DType::f64, kGpu);
    sum_dim(zero_len, 0, none, {.level = level}); // no outputs: nothing to do
  }
}

TEST(SumDimGpu, Bitwise100RepeatsAndAtomicVaries) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor x = testing::random_normal({64, 1 << 16}, DType::f32, fresh_seed(), kGpu);
  for (int dim : {0, 1}) {
    Tensor out = Tensor::empty({dim == 0 ? 1 << 16 : 64}, DType::f32, kGpu);
    std::set<std::uint64_t> hashes;
    for (int r = 0; r < 100; ++r) {
      sum_dim(x, dim, out, {.level = kRr});
      hashes.insert(content_hash(out));
    }
    EXPECT_EQ(hashes.size(), 1u) << "dim " << dim;
  }
  // Along dim 0 of [2^20, 16]: 256 chunk sums per output added atomically in completion order.
  Tensor y = testing::random_normal({1 << 20, 16}, DType::f32, fresh_seed(), kGpu);
  Tensor out = Tensor::empty({16}, DType::f32, kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 200 && hashes.size() < 2; ++r) {
    sum_dim(y, 0, out, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

// --- dot --------------------------------------------------------------------------------------

TEST(DotGpu, MatchesReferenceAndEqualsCpuBitwise) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dtype : {DType::f32, DType::f64})
    for (std::int64_t n : {1, 300, 4096, 4097, 100003, 1 << 20, (1 << 24) + 5}) {
      if (!testing::within_work_limit(n))
        continue;
      Tensor ha = testing::random_normal({n}, dtype, seed),
             hb = testing::random_normal({n}, dtype, seed + 1);
      Tensor a = ha.to(kGpu), b = hb.to(kGpu);
      const auto va = testing::to_doubles(ha), vb = testing::to_doubles(hb);
      long double ref = 0;
      double mag = 0;
      for (std::size_t i = 0; i < va.size(); ++i) {
        ref += static_cast<long double>(va[i]) * vb[i];
        mag += std::abs(va[i] * vb[i]);
      }
      Tensor want = Tensor::empty({1}, dtype);
      dot(ha, hb, want, {.level = kPo});
      for (auto level : {kNg, kPo}) {
        Tensor out = Tensor::empty({1}, dtype, kGpu);
        dot(a, b, out, {.level = level});
        EXPECT_LE(std::abs(testing::to_doubles(out)[0] - static_cast<double>(ref)),
                  bound(dtype, n, mag))
            << "n " << n;
      }
      for (const auto& c : kConfigs) {
        LaunchConfig lc(c.block, c.grid);
        Tensor out = Tensor::empty({1}, dtype, kGpu);
        dot(a, b, out, {.level = kPo});
        EXPECT_EQ(first_difference(out, want), -1) << "n " << n << " " << c.name;
      }
      if (n > 2) { // misaligned and strided operands
        Tensor keep;
        const TensorView bs = testing::strided_copy(b, keep);
        Tensor out = Tensor::empty({1}, dtype, kGpu), w2 = Tensor::empty({1}, dtype);
        dot(a.view().slice(0, 1, n), bs.slice(0, 0, n - 1), out, {.level = kPo});
        dot(ha.view().slice(0, 1, n), hb.view().slice(0, 0, n - 1), w2, {.level = kPo});
        EXPECT_EQ(first_difference(out, w2), -1) << "n " << n << " shifted/strided";
      }
    }
}

TEST(DotGpu, RunToRunBitwiseAndSpecialValues) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor ha = testing::random_normal({777777}, DType::f32, seed);
  Tensor hb = testing::random_normal({777777}, DType::f32, seed + 1);
  ha.data<float>()[5] = std::numeric_limits<float>::denorm_min();
  hb.data<float>()[5] = 3.0f;
  Tensor a = ha.to(kGpu), b = hb.to(kGpu), out = Tensor::empty({1}, DType::f32, kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 100; ++r) {
    dot(a, b, out, {.level = kRr});
    hashes.insert(content_hash(out));
  }
  EXPECT_EQ(hashes.size(), 1u) << "seed " << seed;
  Tensor want = Tensor::empty({1}, DType::f32);
  dot(ha, hb, want, {.level = kPo});
  EXPECT_EQ(first_difference(out, want), -1) << "seed " << seed;
  hb.data<float>()[100] = std::numeric_limits<float>::infinity();
  dot(ha, hb, want, {.level = kPo});
  dot(a, hb.to(kGpu), out, {.level = kPo});
  EXPECT_EQ(first_difference(out, want), -1);
  Tensor e = Tensor::empty({0}, DType::f32, kGpu);
  dot(e, e, out, {.level = kPo});
  EXPECT_EQ(out.to_vector<float>()[0], 0.0f);
  EXPECT_FALSE(std::signbit(out.to_vector<float>()[0]));
}

TEST(ReduceGpuErrors, BadInputThrowsAndLeavesOutputUntouched) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor x = testing::random_normal({10}, DType::f32, fresh_seed(), kGpu);
  Tensor out = Tensor::full({1}, 42.0, DType::f32, kGpu);
  Tensor out_cpu = Tensor::full({1}, 42.0, DType::f32);
  Tensor out2 = Tensor::full({2}, 42.0, DType::f32, kGpu);
  EXPECT_THROW(sum(x, out_cpu), InvalidArgument);
  EXPECT_THROW(sum(x, out2), InvalidArgument);
  EXPECT_THROW(sum_dim(x, 1, out), InvalidArgument);
  EXPECT_THROW(dot(x, testing::random_normal({11}, DType::f32, 1, kGpu), out), InvalidArgument);
  EXPECT_EQ(out.to_vector<float>()[0], 42.0f);
  EXPECT_EQ(out2.to_vector<float>(), std::vector<float>(2, 42.0f));
  EXPECT_EQ(out_cpu.data<float>()[0], 42.0f);
}

} // namespace
} // namespace samebits

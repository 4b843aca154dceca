// bincount and histc on CUDA: counts exact, the portable variants bitwise equal to the CPU under
// two launch shapes (edges, NaN, inf and non-finite weights included), run-to-run stability over
// 100 repeats, the float-atomic variant's nondeterminism, bad indices reported with nothing
// written.
#include "core/strided.hpp"
#include "ops/histogram_choice.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

namespace samebits {
namespace {

using testing::fresh_seed;

constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kPo = Determinism::portable;
const Device kGpu = Device::cuda();

// The alternative launch tuning of the histogram family (64-thread blocks on a small grid).
class AltLaunch {
public:
  explicit AltLaunch(bool on) : guard_({.alternative = on}) {}

private:
  detail::TuningGuard<detail::HistogramTuning> guard_;
};

TEST(BincountGpu, CountsEqualCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType it : {DType::i32, DType::i64})
    for (std::int64_t bins : {1, 1000, 6145, 1'000'000})
      for (auto level : {kNg, kPo}) {
        Tensor idx = testing::random_index(2'000'000, bins, it, seed);
        Tensor want = Tensor::empty({bins + 2}, DType::i64);
        bincount(idx, TensorView{}, want);
        Tensor out = Tensor::full({bins + 2}, -1.0, DType::i64, kGpu);
        bincount(idx.to(kGpu), TensorView{}, out, {.level = level});
        EXPECT_TRUE(bitwise_equal(out.to(Device::cpu()), want)) << "bins " << bins;
      }
}

TEST(BincountGpu, WeightedPortableBitwiseEqualsCpuUnderTwoLaunchShapes) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (DType dt : {DType::f32, DType::f64})
    for (std::int64_t bins : {1, 7, 1000, 6144, 6145, 100000})
      for (std::int64_t n : {0, 1, 1000, 1'000'000}) {
        Tensor idx = testing::random_index(n, bins, DType::i64, seed);
        Tensor w = testing::random_normal({n}, dt, seed + 1);
        if (n == 1000) { // non-finite weights in a few bins
          detail::visit_float(dt, "test", [&]<class T>() {
            w.data<T>()[3] = std::numeric_limits<T>::infinity();
            w.data<T>()[500] = std::numeric_limits<T>::quiet_NaN();
            w.data<T>()[900] = -std::numeric_limits<T>::infinity();
          });
        }
        Tensor want = Tensor::empty({bins}, dt);
        bincount(idx, w, want, {.level = kPo});
        for (bool alt : {false, true}) {
          AltLaunch hook(alt);
          Tensor out = Tensor::full({bins}, 9.0, dt, kGpu);
          bincount(idx.to(kGpu), w.to(kGpu), out, {.level = kPo});
          EXPECT_TRUE(bitwise_equal(out.to(Device::cpu()), want))
              << to_string(dt) << " bins " << bins << " n " << n << " alt " << alt;
        }
      }
}

TEST(BincountGpu, StridedIndexWeightsAndOut) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor idx = testing::random_index(5000, 50, DType::i32, fresh_seed());
  Tensor w = testing::random_normal({5000}, DType::f32, fresh_seed());
  Tensor want = Tensor::empty({50}, DType::f32);
  bincount(idx, w, want, {.level = kPo});
  Tensor k1, k2, k3;
  TensorView is = testing::strided_copy(idx.to(kGpu), k1),
             ws = testing::strided_copy(w.to(kGpu), k2);
  TensorView os = testing::strided_copy(Tensor::zeros({50}, DType::f32, kGpu), k3);
  bincount(is, ws, os, {.level = kPo});
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(os, Device::cpu()), want));
}

TEST(BincountGpu, FloatAtomicsCloseToReferenceAndVaryRunToRun) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor idx = testing::random_index(4'000'000, 4, DType::i64, fresh_seed(), kGpu);
  Tensor w = testing::random_normal({4'000'000}, DType::f32, fresh_seed(), kGpu);
  { // float64 reference
    const auto iv = testing::to_doubles(idx), wv = testing::to_doubles(w);
    std::vector<double> r(4, 0), mag(4, 0);
    for (std::size_t i = 0; i < iv.size(); ++i) {
      r[static_cast<std::size_t>(iv[i])] += wv[i];
      mag[static_cast<std::size_t>(iv[i])] += std::abs(wv[i]);
    }
    Tensor out = Tensor::empty({4}, DType::f32, kGpu);
    bincount(idx, w, out, {.level = kNg});
    const auto o = testing::to_doubles(out);
    for (int b = 0; b < 4; ++b)
      EXPECT_NEAR(o[b], r[b], 1e-5 * mag[b]);
  }
  Tensor out = Tensor::empty({4}, DType::f32, kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 300 && hashes.size() < 2; ++r) {
    bincount(idx, w, out, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

TEST(BincountGpu, PortableRunToRunOver100Repeats) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor idx = testing::random_index(1'000'000, 1000, DType::i64, fresh_seed(), kGpu);
  Tensor w = testing::random_normal({1'000'000}, DType::f32, fresh_seed(), kGpu);
  Tensor out = Tensor::empty({1000}, DType::f32, kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 100; ++r) {
    bincount(idx, w, out, {.level = kPo});
    hashes.insert(content_hash(out));
  }
  EXPECT_EQ(hashes.size(), 1u);
}

TEST(BincountGpu, BadIndexThrowsAndWritesNothing) {
  SAMEBITS_REQUIRE_CUDA();
  for (auto level : {kNg, kPo})
    for (bool weighted : {false, true})
      for (std::int64_t bad : {-1, 10, 1000}) {
        Tensor idx = testing::random_index(300000, 10, DType::i64, fresh_seed());
        idx.data<std::int64_t>()[277777] = bad;
        idx.data<std::int64_t>()[288888] = -5;
        Tensor w = testing::random_normal({300000}, DType::f32, fresh_seed(), kGpu);
        Tensor out = Tensor::full({10}, 42.0, weighted ? DType::f32 : DType::i64, kGpu);
        try {
          bincount(idx.to(kGpu), weighted ? w.view() : TensorView{}, out, {.level = level});
          ADD_FAILURE() << "no throw";
        } catch (const IndexOutOfRange& e) {
          EXPECT_NE(std::string(e.what()).find("index[277777] = " + std::to_string(bad)),
                    std::string::npos)
              << e.what();
        }
        for (double v : testing::to_doubles(out))
          ASSERT_EQ(v, 42.0);
      }
  // No bins at all: every index is out of range, the first one is named.
  Tensor idx = testing::random_index(1000, 10, DType::i32, fresh_seed(), kGpu);
  Tensor w = testing::random_normal({1000}, DType::f64, fresh_seed(), kGpu);
  for (auto level : {kNg, kPo})
    for (bool weighted : {false, true}) {
      Tensor none = Tensor::empty({0}, weighted ? DType::f64 : DType::i64, kGpu);
      try {
        bincount(idx, weighted ? w.view() : TensorView{}, none, {.level = level});
        ADD_FAILURE() << "no throw";
      } catch (const IndexOutOfRange& e) {
        EXPECT_NE(std::string(e.what()).find("index[0] = "), std::string::npos) << e.what();
      }
    }
}

// Values on every bin edge (computed in T), just beside them, outside, NaN and inf, and normal
// noise: GPU bins equal CPU bins bit for bit.
template <class T> Tensor edge_values(std::int64_t bins, T lo, T hi, std::uint64_t seed) {
  std::vector<T> v;
  for (std::int64_t k = 0; k <= bins; ++k) {
    const T e = lo + (hi - lo) * static_cast<T>(k) / static_cast<T>(bins);
    v.push_back(e);
    v.push_back(std::nextafter(e, hi + 1));
    v.push_back(std::nextafter(e, lo - 1));
  }
  v.push_back(std::numeric_limits<T>::quiet_NaN());
  v.push_back(std::numeric_limits<T>::infinity());
  v.push_back(-std::numeric_limits<T>::infinity());
  v.push_back(hi + 1);
  const Tensor noise_t = testing::random_normal({200000}, dtype_of<T>(), seed);
  const T* noise = noise_t.data<T>();
  v.insert(v.end(), noise, noise + noise_t.numel());
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())});
}

TEST(HistcGpu, BitwiseEqualsCpuUnderTwoLaunchShapes) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (std::int64_t bins : {1, 100, 3000, 10000, 12289, 100000})
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor x = dt == DType::f32 ? edge_values<float>(bins, -2.1f, 1.7f, seed)
                                  : edge_values<double>(bins, -2.1, 1.7, seed);
      Tensor want = Tensor::empty({bins}, dt);
      histc(x, -2.1, 1.7, want);
      for (bool alt : {false, true}) {
        AltLaunch hook(alt);
        Tensor out = Tensor::full({bins}, 9.0, dt, kGpu);
        histc(x.to(kGpu), -2.1, 1.7, out);
        EXPECT_TRUE(bitwise_equal(out.to(Device::cpu()), want))
            << "bins " << bins << " alt " << alt;
      }
    }
}

TEST(HistcGpu, StridedEmptyAndRunToRun) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor x = testing::random_uniform({500, 300}, DType::f32, -1, 1, fresh_seed());
  Tensor want = Tensor::empty({77}, DType::f32);
  histc(x, -1.0, 1.0, want);
  Tensor keep;
  const Tensor xg = x.to(kGpu);
  TensorView xs = testing::strided_copy(xg, keep);
  Tensor out = Tensor::empty({77}, DType::f32, kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 100; ++r) {
    histc(r % 2 ? xs : xg.view(), -1.0, 1.0, out);
    hashes.insert(content_hash(out));
  }
  EXPECT_EQ(hashes.size(), 1u);
  EXPECT_EQ(*hashes.begin(), content_hash(want));
  Tensor e = Tensor::empty({0}, DType::f64, kGpu), eo = Tensor::full({3}, 9.0, DType::f64, kGpu);
  histc(e, 0, 1, eo);
  EXPECT_EQ(testing::to_doubles(eo), (std::vector<double>{0, 0, 0}));
}

} // namespace
} // namespace samebits

// segment_reduce and aggregate on CUDA: against the float64 reference, portable bitwise equal to
// the CPU portable variant for many shapes and three launch configurations, run_to_run over 100
// repeats, the atomic variant's nondeterminism, NaN rules, empty inputs, bad offsets and indices
// reported with nothing written.
#include "core/strided.hpp"
#include "ops/segment.hpp"
#include "ops/segment_choice.hpp"
#include "segment_reference.hpp"
#include "testing.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace samebits {
namespace {

using testing::fresh_seed;
using testing::random_offsets;
using testing::segment_reference;

constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kRr = Determinism::run_to_run;
constexpr Determinism kPo = Determinism::portable;
constexpr Reduce kReduces[] = {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin};
const Device kGpu = Device::cuda();

// Sets the segment family's launch tuning (ops/segment_choice.hpp) for its lifetime.
using LaunchGuard = detail::TuningGuard<detail::SegmentTuning>;
// Block sizes, vector loads on and off, the staged kernel, the kernel that loads ahead, and the
// pull with 4, 8 and 16 positions in flight (staged and ahead off, so that the pull runs).
const detail::SegmentTuning kLaunches[] = {
    {0, true, true, true},        {128, false, false, false, 8}, {512, true, false, true},
    {64, false, false, false, 4}, {0, true, false, false, 16},   {256, true, false, false, 8},
    {0, true, false, false, 0}}; // batch 0: chosen from the shape

// The kernel a launch tuning gives a contiguous [positions, cols] -> [segs, cols] call: the pull
// with the tuning's batch when it forces one (the test then runs that batch, not another).
void expect_forced_batch(const detail::SegmentTuning& t, std::int64_t segs, std::int64_t cols,
                         std::int64_t positions, DType dt) {
  if (t.batch == 0)
    return;
  detail::SegmentShape s;
  s.segs = segs;
  s.cols = cols;
  s.positions = positions;
  s.ldx = s.ldo = cols;
  s.elem_bytes = static_cast<int>(size_of(dt));
  const detail::SegmentChoice c = detail::choose_segment_kernel(s, t);
  EXPECT_EQ(c.kernel, detail::SegmentKernel::pull) << c.name();
  EXPECT_EQ(c.batch, t.batch) << c.name();
}

TEST(SegmentGpu, MatchesFloat64Reference) {
  SAMEBITS_REQUIRE_CUDA();
  const std::tuple<std::int64_t, std::int64_t, std::int64_t> shapes[] = {
      {1000, 10, 1}, {300, 20, 3}, {200, 15, 64}, {50, 40, 130}, {7, 3000, 8}};
  for (auto [segs, avg, cols] : shapes)
    for (DType dt : {DType::f32, DType::f64}) {
      const auto seed = fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed) + " cols " + std::to_string(cols));
      Tensor off = random_offsets(segs, avg, seed, 5, 2);
      const auto offv = off.to_vector<std::int64_t>();
      Tensor x = testing::random_normal({offv.back(), cols}, dt, seed + 1);
      const auto xv = testing::to_doubles(x);
      Tensor xg = x.to(kGpu), offg = off.to(kGpu);
      for (Reduce r : kReduces)
        for (auto level : {kNg, kPo}) {
          Tensor out = Tensor::full({segs, cols}, 42.0, dt, kGpu);
          segment_reduce(xg, offg, out, r, {.level = level});
          const auto ref = segment_reference(xv, cols, offv, nullptr, r);
          if (r == Reduce::amax || r == Reduce::amin)
            EXPECT_EQ(testing::to_doubles(out), ref);
          else
            EXPECT_LT(testing::relative_error(out, ref), dt == DType::f32 ? 2e-5 : 1e-13);
        }
    }
}

TEST(SegmentGpu, AggregateMatchesFloat64Reference) {
  SAMEBITS_REQUIRE_CUDA();
  for (DType it : {DType::i32, DType::i64})
    for (std::int64_t cols : {1, 16, 128, 100}) {
      const auto seed = fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed));
      const std::int64_t n = 2000;
      Csr csr = csr_from_edges(testing::random_index(20000, n, it, seed),
                               testing::random_index(20000, n, it, seed + 1), n);
      Tensor x = testing::random_normal({n, cols}, DType::f32, seed + 2);
      const auto ref_off = csr.offsets.to_vector<std::int64_t>();
      std::vector<std::int64_t> ref_idx;
      for (double v : testing::to_doubles(csr.indices))
        ref_idx.push_back(static_cast<std::int64_t>(v));
      // Unchecked graph view (validated on the device on every call).
      Tensor offg = csr.offsets.to(kGpu), idxg = csr.indices.to(kGpu), xg = x.to(kGpu);
      for (Reduce r : kReduces)
        for (auto level : {kNg, kPo}) {
          Tensor out = Tensor::full({n, cols}, 42.0, DType::f32, kGpu);
          aggregate({offg, idxg}, xg, out, r, {.level = level});
          const auto ref = segment_reference(testing::to_doubles(x), cols, ref_off, &ref_idx, r);
          if (r == Reduce::amax || r == Reduce::amin)
            EXPECT_EQ(testing::to_doubles(out), ref);
          else
            EXPECT_LT(testing::relative_error(out, ref), 2e-6);
        }
    }
}

// Portable results are the CPU's bits, for every launch configuration.
TEST(SegmentGpu, PortableBitwiseEqualsCpuAcrossLaunchConfigurations) {
  SAMEBITS_REQUIRE_CUDA();
  struct Shape3 {
    std::int64_t segs, avg, cols;
  };
  for (Shape3 sh : {Shape3{5000, 5, 1},
                    {1000, 12, 2},
                    {700, 9, 4},
                    {500, 8, 16},
                    {300, 10, 33},
                    {256, 16, 64},
                    {128, 20, 128},
                    {40, 30, 200},
                    {10, 50, 1433},
                    {3, 5000, 32},
                    {2708, 4, 7},
                    {20, 400, 7},
                    {2000, 40, 1},
                    {4, 3000, 1}}) {
    const auto seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed) + " cols " + std::to_string(sh.cols));
    for (DType dt : {DType::f32, DType::f64}) {
      Tensor off = random_offsets(sh.segs, sh.avg, seed, 5, 2);
      const std::int64_t e = off.to_vector<std::int64_t>().back();
      Tensor x = testing::random_normal({e, sh.cols}, dt, seed + 1);
      // A second x with a NaN and signed zeros, to hold the NaN/zero rules to the CPU's bits.
      if (e > 3) {
        Tensor xc = x.clone();
        detail::visit_float(dt, "test", [&]<class T>() {
          T* p = xc.data<T>();
          p[0] = std::numeric_limits<T>::quiet_NaN();
          p[1] = std::numeric_limits<T>::infinity(); // with p[2] = -inf: inf + -inf is NaN
          p[2] = -std::numeric_limits<T>::infinity();
          p[xc.numel() / 2] = T(-0.0);
          p[xc.numel() - 1] = T(0.0);
        });
        x = xc;
      }
      Tensor xg = x.to(kGpu), offg = off.to(kGpu);
      Csr csr =
          csr_from_edges(testing::random_index(3 * e + 1, sh.segs, DType::i32, seed + 2),
                         testing::random_index(3 * e + 1, sh.segs, DType::i32, seed + 3), sh.segs);
      Tensor xn = testing::random_normal({sh.segs, sh.cols}, dt, seed + 4);
      const Csr csr_g = csr.to(kGpu);
      Tensor xng = xn.to(kGpu);
      for (Reduce r : kReduces) {
        Tensor cpu_seg = Tensor::empty({sh.segs, sh.cols}, dt);
        segment_reduce(x, off, cpu_seg, r, {.level = kPo});
        Tensor cpu_agg = Tensor::empty({sh.segs, sh.cols}, dt);
        aggregate(csr.view(), xn, cpu_agg, r, {.level = kPo});
        for (const auto& launch : kLaunches) {
          LaunchGuard g(launch);
          expect_forced_batch(launch, sh.segs, sh.cols, e, dt);
          Tensor gpu_seg = Tensor::full({sh.segs, sh.cols}, 7.0, dt, kGpu);
          segment_reduce(xg, offg, gpu_seg, r, {.level = kPo});
          EXPECT_TRUE(bitwise_equal(gpu_seg, cpu_seg))
              << "segment_reduce reduce " << static_cast<int>(r) << " block "
              << launch.block_threads << " batch " << launch.batch;
          Tensor gpu_agg = Tensor::full({sh.segs, sh.cols}, 7.0, dt, kGpu);
          aggregate(csr_g.view(), xng, gpu_agg, r, {.level = kPo});
          EXPECT_TRUE(bitwise_equal(gpu_agg, cpu_agg))
              << "aggregate reduce " << static_cast<int>(r) << " block " << launch.block_threads
              << " batch " << launch.batch;
        }
      }
    }
  }
}

TEST(SegmentGpu, StridedAndMisalignedInputs) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor off = random_offsets(100, 10, seed, 5, 2);
  const std::int64_t e = off.to_vector<std::int64_t>().back();
  Tensor wide = testing::random_normal({e, 70}, DType::f32, seed);
  Tensor offg = off.to(kGpu), wide_g = wide.to(kGpu);
  // Columns 1..65 of a 70-wide matrix: a row stride and a base that is not 16-byte aligned.
  const TensorView part = wide.view().slice(1, 1, 65), part_g = wide_g.view().slice(1, 1, 65);
  // Every other column: not collapsible, computed on a contiguous copy.
  Tensor keep, keep_g;
  const TensorView every_other = testing::strided_copy(wide, keep);
  const TensorView every_other_g = testing::strided_copy(wide_g, keep_g);
  for (Reduce r : kReduces) {
    Tensor c1 = Tensor::empty({100, 64}, DType::f32), c2 = Tensor::empty({100, 70}, DType::f32);
    segment_reduce(part, off, c1, r, {.level = kPo});
    segment_reduce(every_other, off, c2, r, {.level = kPo});
    Tensor g1 = Tensor::empty({100, 64}, DType::f32, kGpu);
    Tensor g2_base = Tensor::empty({100, 70}, DType::f32, kGpu), g2_keep;
    const TensorView g2 = testing::strided_copy(g2_base, g2_keep); // strided output too
    segment_reduce(part_g, offg, g1, r, {.level = kPo});
    segment_reduce(every_other_g, offg, g2, r, {.level = kPo});
    EXPECT_TRUE(bitwise_equal(g1, c1));
    EXPECT_TRUE(bitwise_equal(Tensor::copy_of(g2, Device::cpu()), c2));
  }
}

TEST(SegmentGpu, RunToRunBitwiseOver100Repeats) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t n = 20000;
  Csr csr = csr_from_edges(testing::random_index(400000, n, DType::i32, seed, kGpu),
                           testing::random_index(400000, n, DType::i32, seed + 1, kGpu), n);
  Tensor x = testing::random_normal({n, 64}, DType::f32, seed, kGpu);
  for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax}) {
    std::set<std::uint64_t> hashes;
    Tensor out = Tensor::empty({n, 64}, DType::f32, kGpu);
    for (int rep = 0; rep < 100; ++rep) {
      aggregate(csr.view(), x, out, r, {.level = kRr});
      hashes.insert(content_hash(out));
    }
    EXPECT_EQ(hashes.size(), 1u) << "seed " << seed;
  }
}

TEST(SegmentGpu, AtomicVariantVaries) {
  SAMEBITS_REQUIRE_CUDA();
  // 2M edges into 10 nodes: each target receives ~200k atomic adds in scheduler order.
  const std::int64_t e = 2'000'000;
  Csr csr = csr_from_edges(testing::random_index(e, 100000, DType::i32, fresh_seed()),
                           testing::random_index(e, 10, DType::i32, fresh_seed()), 100000);
  const Csr g = csr.to(kGpu);
  Tensor x = testing::random_normal({100000, 4}, DType::f32, fresh_seed(), kGpu);
  Tensor out = Tensor::empty({100000, 4}, DType::f32, kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 200 && hashes.size() < 2; ++r) {
    aggregate(g.view(), x, out, Reduce::sum, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

TEST(SegmentGpu, EmptyInputs) {
  SAMEBITS_REQUIRE_CUDA();
  for (auto level : {kNg, kPo}) {
    Tensor off = Tensor::from_vector<std::int64_t>({0, 0, 0}, {3}, kGpu);
    Tensor x0 = Tensor::empty({0, 4}, DType::f32, kGpu);
    for (Reduce r : kReduces) {
      Tensor out = Tensor::full({2, 4}, 42.0, DType::f32, kGpu);
      segment_reduce(x0, off, out, r, {.level = level});
      for (float v : out.to_vector<float>()) {
        EXPECT_EQ(v, 0.0f);
        EXPECT_FALSE(std::signbit(v));
      }
    }
    Tensor off0 = Tensor::from_vector<std::int64_t>({0}, {1}, kGpu);
    Tensor out0 = Tensor::empty({0, 4}, DType::f32, kGpu);
    segment_reduce(x0, off0, out0, Reduce::sum, {.level = level});
    Tensor xz = Tensor::empty({3, 0}, DType::f32, kGpu),
           outz = Tensor::empty({2, 0}, DType::f32, kGpu);
    segment_reduce(xz, Tensor::from_vector<std::int64_t>({0, 2, 3}, {3}, kGpu), outz, Reduce::sum,
                   {.level = level});
  }
}

TEST(SegmentGpu, BadOffsetsReportedNothingWritten) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor x = testing::random_normal({6, 2}, DType::f32, fresh_seed(), kGpu);
  for (auto level : {kNg, kPo})
    for (const std::vector<std::int64_t>& bad :
         {std::vector<std::int64_t>{0, 4, 2, 6}, {0, 2, 4, 5}, {0, 2, 4, 7}, {1, 2, 4, 6}}) {
      Tensor out = Tensor::full({3, 2}, 42.0, DType::f32, kGpu);
      EXPECT_THROW(segment_reduce(x, Tensor::from_vector(bad, {4}, kGpu), out, Reduce::mean,
                                  {.level = level}),
                   IndexOutOfRange);
      for (float v : out.to_vector<float>())
        EXPECT_EQ(v, 42.0f);
    }
}

TEST(SegmentGpu, OutOfRangeIndicesReportedNothingWritten) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor x = testing::random_normal({4, 64}, DType::f32, fresh_seed(), kGpu);
  Tensor off = Tensor::from_vector<std::int64_t>({0, 2, 3}, {3}, kGpu);
  for (auto level : {kNg, kPo})
    for (std::int64_t bad : {4, -1, 1 << 30}) {
      Tensor idx = Tensor::from_vector<std::int64_t>({0, bad, 1}, {3}, kGpu);
      Tensor out = Tensor::full({2, 64}, 42.0, DType::f32, kGpu);
      try {
        aggregate({off, idx}, x, out, Reduce::amax, {.level = level});
        ADD_FAILURE() << "no exception for index " << bad;
      } catch (const IndexOutOfRange& e) {
        EXPECT_NE(std::string(e.what()).find("indices[1]"), std::string::npos) << e.what();
      }
      for (float v : out.to_vector<float>())
        EXPECT_EQ(v, 42.0f);
    }
}

TEST(SegmentGpu, CsrBuiltOnTheDeviceMatchesCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor src = testing::random_index(10556, 2708, DType::i64, seed);
  Tensor dst = testing::random_index(10556, 2708, DType::i64, seed + 1);
  Csr c = csr_from_edges(src, dst, 2708), g = csr_from_edges(src.to(kGpu), dst.to(kGpu), 2708);
  EXPECT_EQ(g.offsets.device(), kGpu);
  EXPECT_TRUE(bitwise_equal(c.offsets, g.offsets));
  EXPECT_TRUE(bitwise_equal(c.indices, g.indices));
  Csr t = transpose(g, 2708);
  EXPECT_EQ(t.indices.device(), kGpu);
  Tensor x = testing::random_normal({2708, 16}, DType::f32, seed);
  Tensor a = Tensor::empty({2708, 16}, DType::f32), b = Tensor::empty({2708, 16}, DType::f32, kGpu);
  aggregate(transpose(c, 2708).view(), x, a, Reduce::sum, {.level = kPo});
  aggregate(t.view(), x.to(kGpu), b, Reduce::sum, {.level = kPo});
  EXPECT_TRUE(bitwise_equal(a, b));
}

} // namespace
} // namespace samebits

// index_add, scatter_add, scatter_reduce and the index plan on CUDA (the sort on every call:
// automatic plan reuse off): against the CPU float64 reference; portable variants bitwise equal
// to the CPU's portable results on many shapes and two launch configurations; run_to_run bitwise
// over 100 repeats; the atomic variant's nondeterminism; out-of-range indices reported with
// nothing written. The run_to_run fixed-point sum is held bit for bit to its definition, computed
// here on the host.
#include "core/strided.hpp"
#include "cuda/check.cuh"
#include "ops/fixed_point.hpp"
#include "ops/scatter_choice.hpp"
#include "testing.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace samebits {
namespace {

using testing::expanded_index;
using testing::fresh_seed;
constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kR2r = Determinism::run_to_run;
constexpr Determinism kPo = Determinism::portable;
const Device kGpu = Device::cuda();

// These tests hold the sort that runs on every call to its results, so automatic plan reuse is
// off here (test_plan_cache_gpu.cpp tests it).
class SortEveryCall : public ::testing::Environment {
public:
  void SetUp() override { set_plan_cache_limit(0); }
};
const auto* const kSortEveryCall = ::testing::AddGlobalTestEnvironment(new SortEveryCall);

// Switches the CUDA scatter kernels to their alternative launch configuration for its lifetime.
class LaunchConfig {
public:
  explicit LaunchConfig(bool alternative) : guard_({.alternative = alternative}) {}

private:
  detail::TuningGuard<detail::ScatterTuning> guard_;
};

double index_add_ref_error(const Tensor& gpu_out, const Tensor& out0, const Tensor& index,
                           const Tensor& src) {
  auto ref = testing::to_doubles(out0);
  const auto s = testing::to_doubles(src), idx = testing::to_doubles(index);
  const std::int64_t f = src.numel() / std::max<std::int64_t>(src.size(0), 1);
  for (std::size_t i = 0; i < idx.size(); ++i)
    for (std::int64_t k = 0; k < f; ++k)
      ref[static_cast<std::size_t>(static_cast<std::int64_t>(idx[i]) * f + k)] +=
          s[i * static_cast<std::size_t>(f) + static_cast<std::size_t>(k)];
  return testing::relative_error(gpu_out, ref);
}

struct AddShape {
  std::int64_t e, n, f;
};
const AddShape kAddShapes[] = {
    {0, 4, 3},          {1, 1, 1},       {1000, 10, 1},      {100000, 30000, 1}, {200000, 100, 1},
    {5000, 300, 7},     {4000, 50, 31},  {4000, 50, 32},     {4000, 50, 33},     {30000, 1000, 64},
    {20000, 2708, 128}, {3000, 1, 100},  {6000, 200, 2},     {8000, 400, 16},    {6000, 20, 200},
    {5000, 30, 130},    {3000, 10, 300}, {12000, 2708, 333}, {13264, 2708, 64},  {13265, 2708, 1},
    {13264, 2708, 4},  // GATConv's 4 heads: at run_to_run the kept sort, not the fixed point
    {50001, 1000, 1}}; // odd: int32 index, several sort tiles, 50 sources per target

TEST(ScatterGpu, IndexAddMatchesReferenceAndCpuBitwise) {
  SAMEBITS_REQUIRE_CUDA();
  int case_number = 0;
  for (const auto& sh : kAddShapes)
    for (DType dtype : {DType::f32, DType::f64}) {
      if (!testing::case_in_shard(case_number++) || !testing::within_work_limit(sh.e * sh.f))
        continue;
      const auto seed = fresh_seed();
      SCOPED_TRACE(::testing::Message() << "E=" << sh.e << " N=" << sh.n << " F=" << sh.f << " "
                                        << to_string(dtype) << " seed " << seed);
      Tensor src = testing::random_normal({sh.e, sh.f}, dtype, seed);
      Tensor index =
          testing::random_index(sh.e, sh.n, sh.e % 2 ? DType::i32 : DType::i64, seed + 1);
      Tensor out0 = testing::random_normal({sh.n, sh.f}, dtype, seed + 2);
      for (double alpha : {1.0, 0.3}) {
        Tensor cpu = out0.clone();
        index_add(cpu, index, src, alpha, {.level = kPo});
        Tensor gsrc = src.to(kGpu), gidx = index.to(kGpu);
        const IndexPlan plan = make_index_plan(gidx, sh.n);
        for (bool alt : {false, true}) {
          LaunchConfig lc(alt);
          for (auto level : {kNg, kR2r, kPo}) {
            Tensor out = out0.to(kGpu);
            index_add(out, gidx, gsrc, alpha, {.level = level});
            if (alpha == 1.0) {
              EXPECT_LT(index_add_ref_error(out, out0, index, src),
                        dtype == DType::f32 ? 1e-5 : 1e-13);
            }
            // run_to_run: float32 rows of <= 4 features take the fixed-point sum (tested below),
            // but for a short index that the kept one-block sort serves in fewer launches.
            const bool fixed = level == kR2r && dtype == DType::f32 && sh.f <= 4 &&
                               !detail::fixed_point_yields_to_short_sort(sh.e, sh.n, sh.f);
            EXPECT_EQ(last_explain().find("ran cuda.fixed_point") != std::string::npos, fixed)
                << last_explain();
            if (level != kNg && !fixed) {
              EXPECT_TRUE(bitwise_equal(out, cpu))
                  << "level " << to_string(level) << " alt " << alt;
            }
          }
          for (int batch : {4, 8, 16}) { // rows in flight per group: same bits
            const detail::TuningGuard<detail::ScatterTuning> tuned(
                {.alternative = alt, .pull_batch = batch});
            Tensor out = out0.to(kGpu);
            index_add(out, plan, gsrc, alpha);
            EXPECT_TRUE(bitwise_equal(out, cpu)) << "plan, alt " << alt << " batch " << batch;
          }
        }
      }
    }
}

// The GPU sorts (one block's counting sort for up to 16384 positions and 2944 targets; one block's
// radix sort for up to 11264 positions and 2^17 targets, or with 16-bit keys up to 16384 positions
// and 65535 targets; the counting sort for up to 1536 targets; the radix sort
// beyond them and under the alternative configuration) give the CPU's plan: sizes around the
// one-block limits and the counting sort's 4096-position tiles, target counts around every limit,
// int32 and int64 indices, and a strided index.
// "" when two int64 tensors hold the same values, else where they first differ (EXPECT_EQ on the
// vectors would print every value of a plan with millions of targets).
std::string first_difference(const Tensor& got, const Tensor& want) {
  const auto g = got.to_vector<std::int64_t>(), w = want.to_vector<std::int64_t>();
  if (g.size() != w.size())
    return "sizes " + std::to_string(g.size()) + " and " + std::to_string(w.size());
  const auto at = std::mismatch(g.begin(), g.end(), w.begin());
  if (at.first == g.end())
    return "";
  const auto i = at.first - g.begin();
  return "position " + std::to_string(i) + ": " + std::to_string(*at.first) + " instead of " +
         std::to_string(*at.second);
}

TEST(ScatterGpu, PlanIsTheSameIntegersAsOnTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  int case_number = 0;
  // Keys of 1 to 26 bits: the one-block counting sort (up to 16384 positions and 2944 targets),
  // the one-block radix sorts for short indices (16-bit keys from 11265 to 16384 positions, up to
  // 65535 targets), the counting sort up to 1536 targets, the radix sort in two (5000), three
  // (100000, 2^20) and four (2^25 + 3 targets) digit passes.
  for (bool alt : {false, true})
    for (std::int64_t m :
         {std::int64_t{1}, std::int64_t{777}, std::int64_t{1536}, std::int64_t{1537},
          std::int64_t{2944}, std::int64_t{2945}, std::int64_t{5000}, std::int64_t{65535},
          std::int64_t{65536}, std::int64_t{100000}, std::int64_t{1} << 17,
          (std::int64_t{1} << 17) + 1, std::int64_t{1} << 20, (std::int64_t{1} << 25) + 3})
      for (std::int64_t n : {0, 1, 1000, 4095, 4096, 4097, 11264, 11265, 16384, 16385, 300000}) {
        if (m > (1 << 20) && n < 4097)
          continue;
        if (!testing::case_in_shard(case_number++) || !testing::within_work_limit(n + m))
          continue;
        LaunchConfig lc(alt);
        const auto seed = fresh_seed();
        SCOPED_TRACE(::testing::Message()
                     << "alt " << alt << " m " << m << " n " << n << " seed " << seed);
        const DType dt = n % 2 == 0 ? DType::i64 : DType::i32;
        Tensor index = testing::random_index(n, m, dt, seed);
        const IndexPlan c = make_index_plan(index, m);
        const IndexPlan g = make_index_plan(index.to(kGpu), m);
        EXPECT_TRUE(g.device == kGpu);
        EXPECT_EQ(first_difference(g.order, c.order), "") << "order";
        EXPECT_EQ(first_difference(g.offsets, c.offsets), "") << "offsets";
      }
  LaunchConfig lc(false);
  Tensor wide = testing::random_index(2 * 10000, 300, DType::i64, fresh_seed(), kGpu);
  TensorView strided = wide.view(); // every second element: stride 2
  strided.shape[0] = 10000;
  strided.strides[0] = 2;
  const IndexPlan g = make_index_plan(strided, 300);
  const IndexPlan c = make_index_plan(Tensor::copy_of(strided).to(Device::cpu()), 300);
  EXPECT_EQ(g.order.to_vector<std::int64_t>(), c.order.to_vector<std::int64_t>());
  EXPECT_EQ(g.offsets.to_vector<std::int64_t>(), c.offsets.to_vector<std::int64_t>());
}

// Many targets (more than the counting sort's 1536, a few sources each on average) with some of
// every length from 0 to 1000 sources, in shuffled positions: the plan, and index_add at portable
// on rows of one float (the sort carries the values), one double and 64 floats, equal the CPU's
// under both launch configurations.
TEST(ScatterGpu, ManyTargetsOfEverySourceCountEqualTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  for (bool long_segments : {false, true}) {
    std::vector<std::int64_t> lengths = {0,  1,  2,   3,   31,  32,  33,  63,
                                         64, 65, 127, 128, 129, 200, 255, 256};
    if (long_segments)
      lengths.insert(lengths.end(), {257, 1000});
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    while (lengths.size() < 3000)
      lengths.push_back(static_cast<std::int64_t>(rng() % 7));
    std::shuffle(lengths.begin(), lengths.end(), rng);
    const auto m = static_cast<std::int64_t>(lengths.size());
    std::vector<std::int64_t> idx;
    for (std::int64_t t = 0; t < m; ++t)
      idx.insert(idx.end(), static_cast<std::size_t>(lengths[t]), t);
    std::shuffle(idx.begin(), idx.end(), rng);
    const auto e = static_cast<std::int64_t>(idx.size());
    SCOPED_TRACE(::testing::Message()
                 << "long segments " << long_segments << " E=" << e << " seed " << seed);
    Tensor index = Tensor::from_vector(idx, {e});
    Tensor gindex = index.to(kGpu);
    const IndexPlan c = make_index_plan(index, m);
    for (bool alt : {false, true}) {
      LaunchConfig lc(alt);
      const IndexPlan g = make_index_plan(gindex, m);
      EXPECT_EQ(g.order.to_vector<std::int64_t>(), c.order.to_vector<std::int64_t>())
          << "alt " << alt;
      EXPECT_EQ(g.offsets.to_vector<std::int64_t>(), c.offsets.to_vector<std::int64_t>())
          << "alt " << alt;
    }
    for (const auto& [dtype, f] :
         {std::pair{DType::f32, std::int64_t{1}}, std::pair{DType::f64, std::int64_t{1}},
          std::pair{DType::f32, std::int64_t{64}}}) {
      Tensor src = testing::random_normal({e, f}, dtype, seed + 1);
      Tensor out0 = testing::random_normal({m, f}, dtype, seed + 2);
      Tensor cpu = out0.clone();
      index_add(cpu, index, src, 0.3, {.level = kPo});
      Tensor gsrc = src.to(kGpu);
      for (bool alt : {false, true}) {
        LaunchConfig lc(alt);
        Tensor out = out0.to(kGpu);
        index_add(out, gindex, gsrc, 0.3, {.level = kPo});
        EXPECT_TRUE(bitwise_equal(out, cpu)) << to_string(dtype) << " F=" << f << " alt " << alt;
      }
    }
  }
}

struct ScatterCase {
  Shape out, index, src;
  int dim;
  bool expand; // index expanded from a vector along dim 0 (the rows path)
};
const ScatterCase kCases[] = {
    {{50}, {400}, {400}, 0, false},
    {{30, 8}, {500, 8}, {500, 8}, 0, true},
    {{30, 40}, {500, 40}, {500, 40}, 0, true},
    {{30, 8}, {500, 8}, {500, 8}, 0, false},
    {{30, 8}, {500, 5}, {600, 9}, 0, false},
    {{6, 40}, {6, 300}, {6, 300}, 1, false},
    {{4, 7, 9}, {4, 50, 9}, {4, 50, 9}, 1, false},
    {{3, 5, 6, 11}, {2, 4, 6, 30}, {3, 4, 6, 30}, 3, false},
    {{3, 5, 6, 11}, {3, 5, 40, 11}, {3, 5, 40, 11}, 2, false},
};

TEST(ScatterGpu, ScatterReducePortableEqualsCpuEveryReduce) {
  SAMEBITS_REQUIRE_CUDA();
  int case_number = 0;
  for (const auto& c : kCases)
    for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin, Reduce::prod})
      for (bool self : {false, true}) {
        if (!testing::case_in_shard(case_number++))
          continue;
        const auto seed = fresh_seed();
        SCOPED_TRACE(::testing::Message() << "dim " << c.dim << " " << to_string(r) << " self "
                                          << self << " seed " << seed);
        auto make = [&](const Shape& s, std::uint64_t sd) {
          return r == Reduce::prod ? testing::random_uniform(s, DType::f32, 0.9, 1.1, sd)
                                   : testing::random_normal(s, DType::f32, sd);
        };
        Tensor src = make(c.src, seed), out0 = make(c.out, seed + 1);
        const std::int64_t m = c.out[static_cast<std::size_t>(c.dim)];
        Tensor vec = testing::random_index(c.index[0], m, DType::i64, seed + 2);
        Tensor dense = testing::random_index(
            std::accumulate(c.index.begin(), c.index.end(), std::int64_t{1}, std::multiplies<>()),
            m, DType::i32, seed + 3);
        dense = Tensor::copy_of(dense.view().reshape(c.index));
        Tensor gvec = vec.to(kGpu), gdense = dense.to(kGpu);
        const TensorView cidx = c.expand ? expanded_index(vec, c.index) : dense.view();
        const TensorView gidx = c.expand ? expanded_index(gvec, c.index) : gdense.view();
        Tensor cpu = out0.clone();
        scatter_reduce(cpu, c.dim, cidx, src, r, self, {.level = kPo});
        Tensor gsrc = src.to(kGpu);
        Tensor keep_out, keep_src;
        for (bool alt : {false, true}) {
          LaunchConfig lc(alt);
          for (auto level : {kNg, kPo})
            for (bool strided : {false, true}) {
              Tensor out = out0.to(kGpu);
              TensorView o = strided ? testing::strided_copy(out, keep_out) : out.view();
              TensorView s = strided ? testing::strided_copy(gsrc, keep_src) : gsrc.view();
              scatter_reduce(o, c.dim, gidx, s, r, self, {.level = level});
              if (level == kPo)
                EXPECT_TRUE(bitwise_equal(o, cpu)) << "alt " << alt << " strided " << strided;
              else
                EXPECT_LT(testing::relative_error(o, testing::to_doubles(cpu)), 1e-5)
                    << "strided " << strided;
            }
          if (r == Reduce::sum && self) {
            Tensor out = out0.to(kGpu);
            scatter_add(out, c.dim, gidx, gsrc, {.level = kPo});
            EXPECT_TRUE(bitwise_equal(out, cpu));
          }
        }
      }
}

// --- the fixed-point sum (run_to_run) ----------------------------------------------------------

using Adds = std::vector<std::pair<std::int64_t, float>>; // (row-major target, contribution)

// include/samebits/ops/scatter.hpp's fixed-point definition, on the host, from the list of
// contributions (any order: integer sums) and the starting values (a contiguous float32 tensor).
Tensor fixed_point_reference(const Tensor& out0, const Adds& adds) {
  double max_abs = 0;
  for (const auto& [t, c] : adds)
    if (std::isfinite(c))
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(c)));
  const int s = detail::fixed_point_shift(static_cast<std::int64_t>(adds.size()), max_abs);
  const auto n = static_cast<std::size_t>(out0.numel());
  std::vector<std::int64_t> q(n, 0);
  std::vector<unsigned> mask(n, 0);
  for (const auto& [t, c] : adds) {
    const auto k = static_cast<std::size_t>(t);
    if (std::isfinite(c))
      q[k] += std::llrint(detail::scale_pow2(c, s));
    else
      mask[k] |= detail::special_bit(c);
  }
  Tensor r = Tensor::copy_of(out0.view(), Device::cpu());
  float* p = r.data<float>();
  for (std::size_t k = 0; k < n; ++k) {
    if (mask[k] != 0)
      p[k] = p[k] + detail::special_value<float>(mask[k]);
    else if (q[k] != 0)
      p[k] = static_cast<float>(static_cast<double>(p[k]) +
                                detail::scale_pow2(static_cast<double>(q[k]), -s));
  }
  return r;
}

// The contributions of index_add(out [N, F], index [E], src [E, F], alpha) (CPU tensors).
Adds index_add_contributions(const Tensor& index, const Tensor& src, double alpha) {
  const auto idx = testing::to_doubles(index);
  const auto v = testing::to_doubles(src);
  const std::size_t f = idx.empty() ? 1 : v.size() / idx.size();
  Adds adds;
  for (std::size_t i = 0; i < idx.size(); ++i)
    for (std::size_t k = 0; k < f; ++k) {
      const auto c = static_cast<float>(v[i * f + k]);
      adds.emplace_back(static_cast<std::int64_t>(idx[i]) * static_cast<std::int64_t>(f) +
                            static_cast<std::int64_t>(k),
                        alpha == 1.0 ? c : static_cast<float>(alpha) * c);
    }
  return adds;
}

const detail::ScatterTuning kFixedLaunches[] = {
    {}, {.fixed_blocks = 1}, {.fixed_blocks = detail::kFixedClusterBlocks}, {.alternative = true}};

TEST(ScatterGpu, FixedPointIndexAddIsItsDefinitionBitForBit) {
  SAMEBITS_REQUIRE_CUDA();
  struct S {
    std::int64_t e, n, f;
  };
  for (const S sh :
       {S{1, 1, 1}, S{1000, 10, 1}, S{300000, 1000, 1}, S{200000, 100000, 1}, S{50000, 7, 2},
        S{40000, 3000, 3}, S{60000, 500, 4}, S{16400, 20000, 4}, S{5000, std::int64_t{1} << 21, 1},
        // one block (the default launch) around its limits: Cora's counts, 2^14 values into
        // 4096 targets, and one value or one target past them
        S{10556, 2708, 1}, S{4096, 1024, 4}, S{16385, 100, 1}, S{100, 4097, 1}}) {
    const auto seed = fresh_seed();
    SCOPED_TRACE(::testing::Message()
                 << "E=" << sh.e << " N=" << sh.n << " F=" << sh.f << " seed " << seed);
    Tensor src = testing::random_normal({sh.e, sh.f}, DType::f32, seed);
    Tensor index = testing::random_index(sh.e, sh.n, sh.e % 2 ? DType::i32 : DType::i64, seed + 1);
    Tensor out0 = testing::random_normal({sh.n, sh.f}, DType::f32, seed + 2);
    for (double alpha : {1.0, -0.3}) {
      const Tensor want = fixed_point_reference(out0, index_add_contributions(index, src, alpha));
      Tensor gsrc = src.to(kGpu), gidx = index.to(kGpu);
      // The default launch, one block, a cluster of blocks (where the GPU has clusters) and the
      // alternative configuration's three kernels.
      for (const detail::ScatterTuning& t : kFixedLaunches) {
        const detail::TuningGuard<detail::ScatterTuning> tuned(t);
        Tensor out = out0.to(kGpu);
        index_add(out, gidx, gsrc, alpha, {.level = kR2r});
        EXPECT_NE(last_explain().find("ran cuda.fixed_point"), std::string::npos) << last_explain();
        EXPECT_TRUE(bitwise_equal(out, want))
            << "alpha " << alpha << " alt " << t.alternative << " blocks " << t.fixed_blocks;
        if (alpha == 1.0) {
          EXPECT_LT(index_add_ref_error(out, out0, index, src), 2e-7);
        }
      }
    }
  }
}

TEST(ScatterGpu, FixedPointScatterAddAnyShapeIsItsDefinition) {
  SAMEBITS_REQUIRE_CUDA();
  for (const auto& c : kCases) {
    const auto seed = fresh_seed();
    SCOPED_TRACE(::testing::Message() << "dim " << c.dim << " seed " << seed);
    Tensor src = testing::random_normal(c.src, DType::f32, seed),
           out0 = testing::random_normal(c.out, DType::f32, seed + 1);
    const std::int64_t m = c.out[static_cast<std::size_t>(c.dim)];
    const std::int64_t count =
        std::accumulate(c.index.begin(), c.index.end(), std::int64_t{1}, std::multiplies<>());
    Tensor dense = Tensor::copy_of(
        testing::random_index(count, m, DType::i64, seed + 2).view().reshape(c.index));
    // Contributions: every position p of the index shape sends src[p] to out[p, p[dim] = index[p]].
    const auto idx = testing::to_doubles(dense), sv = testing::to_doubles(src);
    const int nd = static_cast<int>(c.index.size());
    Adds adds;
    for (std::int64_t e = 0; e < count; ++e) {
      std::int64_t rest = e, so = 0, to = 0, smul = 1, tmul = 1;
      for (int j = nd - 1; j >= 0; --j) {
        const auto jj = static_cast<std::size_t>(j);
        const std::int64_t cj = rest % c.index[jj];
        rest /= c.index[jj];
        so += cj * smul;
        to +=
            (j == c.dim ? static_cast<std::int64_t>(idx[static_cast<std::size_t>(e)]) : cj) * tmul;
        smul *= c.src[jj];
        tmul *= c.out[jj];
      }
      adds.emplace_back(to, static_cast<float>(sv[static_cast<std::size_t>(so)]));
    }
    const Tensor want = fixed_point_reference(out0, adds);
    Tensor gsrc = src.to(kGpu), gdense = dense.to(kGpu), keep_out, keep_src;
    // Every launch: the cluster's kernel for sites of any shape (not rows) included.
    for (const detail::ScatterTuning& t : kFixedLaunches)
      for (bool strided : {false, true}) {
        const detail::TuningGuard<detail::ScatterTuning> tuned(t);
        Tensor out = out0.to(kGpu);
        TensorView o = strided ? testing::strided_copy(out, keep_out) : out.view();
        TensorView s = strided ? testing::strided_copy(gsrc, keep_src) : gsrc.view();
        scatter_add(o, c.dim, gdense, s, {.level = kR2r});
        EXPECT_NE(last_explain().find("ran cuda.fixed_point"), std::string::npos) << last_explain();
        EXPECT_TRUE(bitwise_equal(o, want))
            << "strided " << strided << " alt " << t.alternative << " blocks " << t.fixed_blocks;
      }
  }
}

// A cluster of blocks (each summing its share of the contributions) gives one block's bits where
// the sums, the non-finite values and the first bad index come from different blocks: Cora's
// degree counts, a hub that takes every contribution, rows of 4, with infinities and NaNs spread
// over every block's share or none. Rows (index_add) take the cluster kernel that keeps its sites
// in registers; a dense index (scatter_add, every element its own target row) the general one.
TEST(ScatterGpu, FixedPointClusterGivesOneBlocksBits) {
  SAMEBITS_REQUIRE_CUDA();
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (major < 9)
    GTEST_SKIP() << "no thread block clusters before compute capability 9: one block runs";
  struct S {
    std::int64_t e, n, f;
    bool dense;
  };
  for (const S sh : {S{13264, 2708, 1, false}, S{16384, 4096, 1, false}, S{4000, 1, 1, false},
                     S{4096, 1000, 4, false}, S{4096, 1000, 4, true}, S{3000, 7, 4, true}})
    for (const bool specials : {false, true}) {
      const auto seed = fresh_seed();
      SCOPED_TRACE(::testing::Message()
                   << "E=" << sh.e << " N=" << sh.n << " F=" << sh.f << " dense " << sh.dense
                   << " specials " << specials << " seed " << seed);
      Tensor src = testing::random_normal({sh.e, sh.f}, DType::f32, seed);
      if (specials) {
        const float inf = std::numeric_limits<float>::infinity();
        const float put[] = {inf, -inf, std::numeric_limits<float>::quiet_NaN()};
        std::mt19937_64 gen(seed);
        for (int k = 0; k < 40; ++k)
          src.data<float>()[gen() % static_cast<std::uint64_t>(src.numel())] = put[k % 3];
      }
      // Rows: one index value per row; dense: one per element, its positions numbered flat.
      const std::int64_t positions = sh.dense ? sh.e * sh.f : sh.e;
      Tensor index = testing::random_index(positions, sh.n, DType::i64, seed + 1);
      if (sh.dense)
        index = Tensor::copy_of(index.view().reshape({sh.e, sh.f}));
      Tensor out0 = testing::random_normal({sh.n, sh.f}, DType::f32, seed + 2);
      Tensor gsrc = src.to(kGpu);
      auto add = [&](Tensor& out, const Tensor& gidx) {
        if (sh.dense)
          scatter_add(out, 0, gidx, gsrc, {.level = kR2r});
        else
          index_add(out, gidx, gsrc, 1.0, {.level = kR2r});
      };
      Tensor gidx = index.to(kGpu);
      Tensor outs[2];
      for (const int blocks : {1, detail::kFixedClusterBlocks}) {
        const detail::TuningGuard<detail::ScatterTuning> tuned({.fixed_blocks = blocks});
        Tensor& out = outs[blocks == 1 ? 0 : 1];
        out = out0.to(kGpu);
        add(out, gidx);
        EXPECT_NE(last_explain().find("ran cuda.fixed_point"), std::string::npos) << last_explain();
      }
      EXPECT_TRUE(bitwise_equal(outs[0], outs[1]));
      // Bad indices in the shares of two blocks: the first one is named, nothing is written.
      Tensor bad = index.clone();
      bad.data<std::int64_t>()[positions - 3] = sh.n;
      bad.data<std::int64_t>()[positions / 2 + 7] = -1;
      Tensor gbad = bad.to(kGpu);
      for (const int blocks : {1, detail::kFixedClusterBlocks}) {
        const detail::TuningGuard<detail::ScatterTuning> tuned({.fixed_blocks = blocks});
        Tensor out = out0.to(kGpu);
        try {
          add(out, gbad);
          ADD_FAILURE() << "no error, blocks " << blocks;
        } catch (const IndexOutOfRange& e) {
          EXPECT_NE(std::string(e.what()).find("position " + std::to_string(positions / 2 + 7)),
                    std::string::npos)
              << e.what();
        }
        EXPECT_TRUE(bitwise_equal(out, out0.to(kGpu))) << "blocks " << blocks;
      }
    }
}

TEST(ScatterGpu, FixedPointNonFiniteZeroTinyAndHugeValues) {
  SAMEBITS_REQUIRE_CUDA();
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min(),
              big = std::numeric_limits<float>::max();
  struct Case {
    const char* what;
    std::vector<float> src;
    std::vector<std::int64_t> index;
    std::vector<float> out0;
    std::vector<float> want; // NaN: any NaN
  };
  const Case cases[] = {
      {"inf, -inf, NaN, both infinities, untouched",
       {inf, 1.f, -inf, nan, inf, -inf, 2.f},
       {0, 0, 1, 2, 3, 3, 5},
       {1.f, 1.f, 1.f, 1.f, 7.f, 0.f},
       {inf, -inf, nan, nan, 7.f, 2.f}},
      {"a NaN or infinite start value stays", {1.f, 2.f}, {0, 1}, {nan, -inf}, {nan, -inf}},
      {"contributions that cancel keep the start bits (-0 stays -0)",
       {1.5f, -1.5f, 0.f},
       {0, 0, 1},
       {-0.f, -0.f},
       {-0.f, -0.f}},
      {"denormals alone are exact",
       {tiny, tiny, 3 * tiny},
       {0, 0, 1},
       {0.f, 0.f},
       {2 * tiny, 3 * tiny}},
      {"a sum past float's range is inf",
       {big, big, -big, -big},
       {0, 0, 1, 1},
       {0.f, 0.f},
       {inf, -inf}},
      // The documented limit: the resolution is 2^(e + ceil(log2 n) - 62) for max |c| < 2^e, here
      // 2^40, so contributions of 1 next to 1e30 vanish (the portable level keeps them).
      {"small next to huge: below the resolution",
       {1e30f, 1.f, 1.f},
       {0, 1, 1},
       {0.f, 0.f},
       {1e30f, 0.f}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto n = static_cast<std::int64_t>(c.src.size()),
               m = static_cast<std::int64_t>(c.out0.size());
    Tensor src = Tensor::from_vector(c.src, {n}), index = Tensor::from_vector(c.index, {n});
    Tensor out0 = Tensor::from_vector(c.out0, {m});
    const Tensor ref = fixed_point_reference(out0, index_add_contributions(index, src, 1.0));
    for (bool alt : {false, true}) {
      LaunchConfig lc(alt);
      Tensor out = out0.to(kGpu);
      index_add(out, index.to(kGpu), src.to(kGpu), 1.0, {.level = kR2r});
      EXPECT_NE(last_explain().find("ran cuda.fixed_point"), std::string::npos) << last_explain();
      const Tensor got = out.to(Device::cpu());
      for (std::int64_t k = 0; k < m;
           ++k) { // NaN payloads may differ between CPU and GPU arithmetic
        const float g = got.data<float>()[k], w = c.want[static_cast<std::size_t>(k)],
                    h = ref.data<float>()[k];
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g) && std::isnan(h)) << k << " alt " << alt;
        } else {
          EXPECT_EQ(std::bit_cast<std::uint32_t>(g), std::bit_cast<std::uint32_t>(w))
              << k << ": " << g << " vs " << w << " alt " << alt;
          EXPECT_EQ(std::bit_cast<std::uint32_t>(h), std::bit_cast<std::uint32_t>(w))
              << k << ": reference " << h;
        }
      }
    }
  }
}

TEST(ScatterGpu, FixedPointLeavesWideRowsFloat64AndLargeOutputsToTheSort) {
  SAMEBITS_REQUIRE_CUDA();
  struct S {
    DType dtype;
    std::int64_t n, f;
  };
  for (const S sh : {S{DType::f32, 40, 5}, S{DType::f32, 40, 64}, S{DType::f64, 40, 1},
                     S{DType::f64, 40, 4}, S{DType::f32, (std::int64_t{1} << 21) + 1, 1}}) {
    const auto seed = fresh_seed();
    Tensor src = testing::random_normal({3000, sh.f}, sh.dtype, seed);
    Tensor index = testing::random_index(3000, sh.n, DType::i64, seed + 1);
    Tensor out0 = testing::random_normal({sh.n, sh.f}, sh.dtype, seed + 2);
    Tensor cpu = out0.clone();
    index_add(cpu, index, src, 1.0, {.level = kPo});
    Tensor out = out0.to(kGpu), gsrc = src.to(kGpu), keep;
    index_add(out, index.to(kGpu), gsrc, 1.0, {.level = kR2r});
    EXPECT_NE(last_explain().find("ran cuda.sort_pull"), std::string::npos) << last_explain();
    EXPECT_TRUE(bitwise_equal(out, cpu)) << "N=" << sh.n << " F=" << sh.f << " seed " << seed;
    // The choice follows the shape, not the strides: a strided src takes the same variant.
    out = out0.to(kGpu);
    index_add(out, index.to(kGpu), testing::strided_copy(gsrc, keep), 1.0, {.level = kR2r});
    EXPECT_NE(last_explain().find("ran cuda.sort_pull"), std::string::npos) << last_explain();
    EXPECT_TRUE(bitwise_equal(out, cpu)) << "strided src, N=" << sh.n << " F=" << sh.f;
  }
}

TEST(ScatterGpu, RunToRunBitwiseOver100Repeats) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  struct S {
    std::int64_t e, n, f;
  };
  for (const S sh : {S{200000, 1000, 1}, S{50000, 500, 64}, S{100000, 20000, 3}}) {
    Tensor src = testing::random_normal({sh.e, sh.f}, DType::f32, seed, kGpu);
    Tensor index = testing::random_index(sh.e, sh.n, DType::i64, seed + 1, kGpu);
    const IndexPlan plan = make_index_plan(index, sh.n);
    std::set<std::uint64_t> indexed, planned, reduced;
    for (int r = 0; r < 100; ++r) {
      Tensor out = Tensor::full({sh.n, sh.f}, 0.5, DType::f32, kGpu);
      index_add(out, index, src, 1.0, {.level = kR2r});
      indexed.insert(content_hash(out));
      index_add(out, plan, src);
      planned.insert(content_hash(out));
      scatter_reduce(out, 0, expanded_index(index, {sh.e, sh.f}), src, Reduce::mean, r % 2 == 0,
                     {.level = kR2r});
      reduced.insert(content_hash(out) ^ static_cast<std::uint64_t>(r % 2));
    }
    EXPECT_EQ(indexed.size(), 1u) << "seed " << seed << " F=" << sh.f;
    EXPECT_EQ(planned.size(), 1u) << "seed " << seed;
    EXPECT_EQ(reduced.size(), 2u) << "seed " << seed;
  }
}

TEST(ScatterGpu, AtomicVariantVariesRunToRun) {
  SAMEBITS_REQUIRE_CUDA();
  // Many adds into few targets: the order of atomicAdd changes from run to run.
  Tensor src = testing::random_normal({1 << 20, 1}, DType::f32, fresh_seed(), kGpu);
  Tensor index = testing::random_index(1 << 20, 8, DType::i64, fresh_seed(), kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 500 && hashes.size() < 2; ++r) {
    Tensor out = Tensor::zeros({8, 1}, DType::f32, kGpu);
    index_add(out, index, src, 1.0, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

// Targets with 0, 1, 2 and around one, two and three batches of sources (the few-targets pull
// folds batches of 16 float32 or 8 float64 rows), in a shuffled index: every reduce, with and
// without the start values, alpha 0.3, float32 and float64, rows of one value (the staged span
// pull and the thread pull) and of 64 and 300 features (more than a block's lanes). The GPU's
// chains start and end where the CPU's do, bit for bit.
TEST(ScatterGpu, ChainsOfEveryLengthEqualTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  // Short chains (16 targets, 380 sources), then the same with chains around and past a staging
  // window of rows of one value (255-257 and 600 sources: long chains on average).
  for (bool long_chains : {false, true}) {
    std::vector<std::int64_t> lengths = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 65};
    if (long_chains)
      lengths.insert(lengths.end(), {255, 256, 257, 600});
    const auto n = static_cast<std::int64_t>(lengths.size());
    std::vector<std::int64_t> idx;
    for (std::int64_t t = 0; t < n; ++t)
      idx.insert(idx.end(), static_cast<std::size_t>(lengths[t]), t);
    const auto seed = fresh_seed();
    std::mt19937_64 rng(seed);
    std::shuffle(idx.begin(), idx.end(), rng);
    const auto e = static_cast<std::int64_t>(idx.size());
    Tensor index = Tensor::from_vector(idx, {e});
    Tensor gindex = index.to(kGpu);
    const IndexPlan plan = make_index_plan(gindex, n);
    for (DType dtype : {DType::f32, DType::f64})
      for (std::int64_t f : {1, 64, 300})
        for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin, Reduce::prod}) {
          SCOPED_TRACE(::testing::Message() << to_string(dtype) << " F=" << f << " " << to_string(r)
                                            << " long chains " << long_chains << " seed " << seed);
          Tensor src = r == Reduce::prod
                           ? testing::random_uniform({e, f}, dtype, 0.9, 1.1, seed + 1)
                           : testing::random_normal({e, f}, dtype, seed + 1);
          Tensor out0 = testing::random_normal({n, f}, dtype, seed + 2);
          Tensor gsrc = src.to(kGpu);
          for (bool self : {false, true}) {
            Tensor cpu = out0.clone();
            scatter_reduce(cpu, 0, expanded_index(index, {e, f}), src, r, self, {.level = kPo});
            for (bool alt : {false, true}) {
              LaunchConfig lc(alt);
              Tensor out = out0.to(kGpu);
              scatter_reduce(out, 0, expanded_index(gindex, {e, f}), gsrc, r, self, {.level = kPo});
              EXPECT_TRUE(bitwise_equal(out, cpu)) << "self " << self << " alt " << alt;
            }
          }
          if (r != Reduce::sum)
            continue;
          Tensor cpu = out0.clone();
          index_add(cpu, index, src, 0.3, {.level = kPo});
          for (bool alt : {false, true}) {
            LaunchConfig lc(alt);
            Tensor out = out0.to(kGpu), with_plan = out0.to(kGpu);
            index_add(out, gindex, gsrc, 0.3, {.level = kPo});
            index_add(with_plan, plan, gsrc, 0.3);
            EXPECT_TRUE(bitwise_equal(out, cpu)) << "index_add alpha 0.3, alt " << alt;
            EXPECT_TRUE(bitwise_equal(with_plan, cpu))
                << "index_add with a plan, alpha 0.3, alt " << alt;
          }
        }
  }
}

TEST(ScatterGpu, OutOfRangeIndexIsReportedAndNothingWritten) {
  SAMEBITS_REQUIRE_CUDA();
  // 10 targets (the counting sort) and 2000 (the radix sort), for 2000 also values that would look
  // in range if they were cut to the sort's 11 key bits or to 32 bits.
  for (const auto& [m, bad] : {std::pair<std::int64_t, std::int64_t>{10, -3},
                               {10, 10},
                               {10, 1 << 30},
                               {2000, -1},
                               {2000, 2000},
                               {2000, 2048 + 5},
                               {2000, (std::int64_t{1} << 32) + 5}}) {
    Tensor src = testing::random_normal({5000, 4}, DType::f32, fresh_seed(), kGpu);
    Tensor host_index = testing::random_index(5000, m, DType::i64, fresh_seed());
    host_index.data<std::int64_t>()[3210] =
        bad; // the first bad position; more in a later sort tile
    host_index.data<std::int64_t>()[4500] = bad;
    host_index.data<std::int64_t>()[4999] = -1;
    Tensor index = host_index.to(kGpu);
    Tensor dense = Tensor::copy_of(expanded_index(host_index, {5000, 4})).to(kGpu);
    Tensor src1 = testing::random_normal({5000, 1}, DType::f32, fresh_seed(), kGpu);
    for (bool alt : {false, true})
      for (auto level : {kNg, kR2r, kPo}) {
        LaunchConfig lc(alt);
        SCOPED_TRACE(::testing::Message() << "targets " << m << " bad " << bad << " alt " << alt
                                          << " " << to_string(level));
        // Rows of one value (the sorted values read directly).
        Tensor out1 = testing::random_normal({m, 1}, DType::f32, 6, kGpu);
        const auto before1 = content_hash(out1);
        EXPECT_THROW(index_add(out1, index, src1, 1.0, {.level = level}), IndexOutOfRange);
        EXPECT_THROW(scatter_reduce(out1, 0, expanded_index(index, {5000, 1}), src1, Reduce::mean,
                                    true, {.level = level}),
                     IndexOutOfRange);
        EXPECT_EQ(content_hash(out1), before1);
        Tensor out = testing::random_normal({m, 4}, DType::f32, 5, kGpu);
        const auto before = content_hash(out);
        try {
          index_add(out, index, src, 1.0, {.level = level});
          ADD_FAILURE() << "no error";
        } catch (const IndexOutOfRange& e) {
          EXPECT_NE(std::string(e.what()).find("position 3210"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("index " + std::to_string(bad) + " at position"),
                    std::string::npos)
              << e.what();
        }
        EXPECT_EQ(content_hash(out), before);
        // scatter_add through the dense index (the fixed-point sum's general path at run_to_run):
        // the first bad element is row 3210's first column, element 3210 * 4.
        try {
          scatter_add(out, 0, dense, src, {.level = level});
          ADD_FAILURE() << "no error";
        } catch (const IndexOutOfRange& e) {
          EXPECT_NE(std::string(e.what()).find("position " + std::to_string(3210 * 4)),
                    std::string::npos)
              << e.what();
        }
        EXPECT_EQ(content_hash(out), before);
        for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax}) {
          EXPECT_THROW(scatter_reduce(out, 0, expanded_index(index, {5000, 4}), src, r, false,
                                      {.level = level}),
                       IndexOutOfRange);
          EXPECT_THROW(scatter_reduce(out, 0, dense, src, r, true, {.level = level}),
                       IndexOutOfRange);
          EXPECT_EQ(content_hash(out), before) << to_string(r);
        }
      }
    for (bool alt : {false, true}) {
      LaunchConfig lc(alt);
      try {
        (void)make_index_plan(index, m);
        ADD_FAILURE() << "no error";
      } catch (const IndexOutOfRange& e) {
        EXPECT_NE(std::string(e.what()).find("position 3210"), std::string::npos) << e.what();
      }
    }
  }
  // No targets at all: every index is out of range, and nothing is written.
  Tensor index = testing::random_index(5000, 10, DType::i64, fresh_seed(), kGpu);
  Tensor src = testing::random_normal({5000, 1}, DType::f32, fresh_seed(), kGpu);
  for (bool alt : {false, true}) {
    LaunchConfig lc(alt);
    EXPECT_THROW(make_index_plan(index, 0), IndexOutOfRange);
    for (auto level : {kNg, kR2r, kPo}) {
      Tensor none = Tensor::empty({0, 1}, DType::f32, kGpu);
      EXPECT_THROW(index_add(none, index, src, 1.0, {.level = level}), IndexOutOfRange)
          << to_string(level);
    }
  }
}

TEST(ScatterGpu, EmptyInputs) {
  SAMEBITS_REQUIRE_CUDA();
  for (auto level : {kNg, kR2r, kPo}) {
    Tensor out = Tensor::full({4, 3}, 1.0, DType::f32, kGpu);
    index_add(out, Tensor::empty({0}, DType::i64, kGpu), Tensor::empty({0, 3}, DType::f32, kGpu),
              1.0, {.level = level});
    scatter_reduce(out, 0, Tensor::empty({0, 3}, DType::i64, kGpu),
                   Tensor::empty({0, 3}, DType::f32, kGpu), Reduce::mean, false, {.level = level});
    EXPECT_EQ(testing::to_doubles(out), std::vector<double>(12, 1.0));
    const IndexPlan p = make_index_plan(Tensor::empty({0}, DType::i64, kGpu), 4);
    index_add(out, p, Tensor::empty({0, 3}, DType::f32, kGpu));
    EXPECT_EQ(p.offsets.to_vector<std::int64_t>(), std::vector<std::int64_t>(5, 0));
  }
}

// index_add with alpha != 1 where src, out or both have strided features: the CUDA sort pull's
// general path, and the plan pull through its contiguous copies, give the CPU's portable bits,
// out + alpha * sum(src). Before the fix the general path dropped alpha (out + sum(src)), so
// every case with a strided src or out at `portable` without a plan failed here.
TEST(ScatterGpu, IndexAddAlphaWithStridedFeaturesMatchesCpuBitwise) {
  SAMEBITS_REQUIRE_CUDA();
  const AddShape shapes[] = {{5000, 300, 7}, {20000, 100, 16}, {3000, 40, 2}, {40000, 2708, 33}};
  for (DType dtype : {DType::f32, DType::f64})
    for (const AddShape& sh : shapes) {
      const auto seed = fresh_seed();
      SCOPED_TRACE(::testing::Message() << "E=" << sh.e << " N=" << sh.n << " F=" << sh.f << " "
                                        << to_string(dtype) << " seed " << seed);
      Tensor src = testing::random_normal({sh.e, sh.f}, dtype, seed);
      Tensor index = testing::random_index(sh.e, sh.n, DType::i64, seed + 1);
      Tensor out0 = testing::random_normal({sh.n, sh.f}, dtype, seed + 2);
      Tensor gsrc = src.to(kGpu), gidx = index.to(kGpu);
      const IndexPlan plan = make_index_plan(gidx, sh.n);
      for (double alpha : {0.3, -1.75}) {
        Tensor cpu = out0.clone();
        index_add(cpu, index, src, alpha, {.level = kPo});
        for (int strided : {1, 2, 3}) // 1: src, 2: out, 3: both
          for (bool alt : {false, true}) {
            LaunchConfig lc(alt);
            for (bool with_plan : {false, true}) {
              Tensor out = out0.to(kGpu), keep_out, keep_src;
              const TensorView o = strided & 2 ? testing::strided_copy(out, keep_out) : out.view();
              const TensorView s =
                  strided & 1 ? testing::strided_copy(gsrc, keep_src) : gsrc.view();
              if (with_plan)
                index_add(o, plan, s, alpha);
              else
                index_add(o, gidx, s, alpha, {.level = kPo});
              EXPECT_TRUE(bitwise_equal(o, cpu)) << "alpha " << alpha << " strided " << strided
                                                 << " alt " << alt << " plan " << with_plan;
            }
          }
      }
    }
}

// The NaN rule: sums, means and products that are NaN come back as the canonical quiet NaN from
// every CUDA pull kernel (a thread or a warp per target for rows of one value, lane groups and
// lanes per feature for wider rows, the general path for strided features), bitwise equal to
// the CPU's portable result. NaN inputs carry payloads (and a sign) that x86 arithmetic keeps and
// the GPU's does not: before the rule, the CPU kept 0x7FC01234 where CUDA gave 0x7FFFFFFF.
TEST(ScatterGpu, NanResultsAreTheCanonicalNanBitwiseEqualToTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const AddShape shapes[] = {
      {20000, 3000, 1}, {20000, 100, 1}, {30000, 1000, 8}, {30000, 100000, 8}};
  for (DType dtype : {DType::f32, DType::f64})
    for (const AddShape& sh : shapes) {
      const auto seed = fresh_seed();
      SCOPED_TRACE(::testing::Message() << "E=" << sh.e << " N=" << sh.n << " F=" << sh.f << " "
                                        << to_string(dtype) << " seed " << seed);
      Tensor src = testing::random_normal({sh.e, sh.f}, dtype, seed);
      detail::visit_float(dtype, "test", [&]<class T>() {
        using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
        const U quiet = static_cast<U>(sizeof(T) == 4 ? 0x7fc00000ull : 0x7ff8000000000000ull);
        T* p = src.data<T>();
        for (std::int64_t i = 0; i < src.numel(); i += 97) // every 97th value: NaN with a payload
          p[i] = std::bit_cast<T>(static_cast<U>(quiet | static_cast<U>(i % 1000 + 1) |
                                                 (i % 2 ? ~(~U{0} >> 1) : U{0})));
      });
      Tensor index = testing::random_index(sh.e, sh.n, DType::i64, seed + 1);
      Tensor out0 = testing::random_normal({sh.n, sh.f}, dtype, seed + 2);
      Tensor gsrc = src.to(kGpu), gidx = index.to(kGpu);
      const IndexPlan plan = make_index_plan(gidx, sh.n);
      for (double alpha : {1.0, 0.5}) {
        Tensor cpu = out0.clone();
        index_add(cpu, index, src, alpha, {.level = kPo});
        for (bool alt : {false, true}) {
          LaunchConfig lc(alt);
          Tensor out = out0.to(kGpu);
          index_add(out, gidx, gsrc, alpha, {.level = kPo});
          EXPECT_TRUE(bitwise_equal(out, cpu)) << "sort pull, alpha " << alpha << " alt " << alt;
          Tensor planned = out0.to(kGpu);
          index_add(planned, plan, gsrc, alpha);
          EXPECT_TRUE(bitwise_equal(planned, cpu)) << "plan, alpha " << alpha << " alt " << alt;
          Tensor strided = out0.to(kGpu), keep;
          const TensorView o = testing::strided_copy(strided, keep);
          index_add(o, gidx, gsrc, alpha, {.level = kPo});
          EXPECT_TRUE(bitwise_equal(o, cpu)) << "general path, alpha " << alpha << " alt " << alt;
        }
      }
      const Tensor dense = Tensor::copy_of(testing::expanded_index(index, {sh.e, sh.f}));
      const Tensor gdense = dense.to(kGpu);
      for (Reduce r : {Reduce::mean, Reduce::prod})
        for (bool self : {true, false}) {
          Tensor cpu = out0.clone();
          scatter_reduce(cpu, 0, dense, src, r, self, {.level = kPo});
          Tensor out = out0.to(kGpu);
          scatter_reduce(out, 0, gdense, gsrc, r, self, {.level = kPo});
          EXPECT_TRUE(bitwise_equal(out, cpu)) << to_string(r) << " self " << self;
        }
    }
}

void CUDART_CB hold_the_stream(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

// The plan pull of a strided src on a non-blocking stream whose earlier work writes src: its
// contiguous copies run on the op's stream, after that work. Before the fix they ran on the
// default stream, which does not wait for a non-blocking stream: the copy read src while the
// stream was still held by the host function (src all zeros then), so out came back as out0.
TEST(ScatterGpu, PlanPullOfStridedSourceReadsItAfterTheStreamsEarlierWork) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t e = 200000, n = 1000, f = 8;
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor src = testing::random_normal({e, f}, dtype, seed);
    Tensor index = testing::random_index(e, n, DType::i64, seed + 1);
    Tensor out0 = testing::random_normal({n, f}, dtype, seed + 2);
    Tensor cpu = out0.clone();
    index_add(cpu, index, src, 0.5, {.level = kPo});
    const IndexPlan plan = make_index_plan(index.to(kGpu), n);
    // src as every second element of [e, 2f] rows on the GPU, zeros until the stream writes it.
    Tensor keep_host, keep_dev;
    testing::strided_copy(src, keep_host);
    Tensor zeros = Tensor::full({e, f}, 0.0, dtype, kGpu);
    const TensorView gsrc = testing::strided_copy(zeros, keep_dev);
    const auto bytes = static_cast<std::size_t>(keep_host.numel()) * size_of(dtype);
    void* pinned = nullptr;
    SAMEBITS_CUDA_CHECK(cudaMallocHost(&pinned, bytes));
    std::memcpy(pinned, keep_host.view().data, bytes);
    cudaStream_t st = nullptr;
    SAMEBITS_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    Tensor out = out0.to(kGpu);
    SAMEBITS_CUDA_CHECK(cudaLaunchHostFunc(st, hold_the_stream, nullptr));
    SAMEBITS_CUDA_CHECK(
        cudaMemcpyAsync(keep_dev.view().data, pinned, bytes, cudaMemcpyHostToDevice, st));
    index_add(out, plan, gsrc, 0.5, {.stream = Stream{st}});
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(st));
    EXPECT_TRUE(bitwise_equal(out, cpu)) << to_string(dtype);
    release_stream(Stream{st}, kGpu);
    SAMEBITS_CUDA_CHECK(cudaStreamDestroy(st));
    SAMEBITS_CUDA_CHECK(cudaFreeHost(pinned));
  }
}

} // namespace
} // namespace samebits

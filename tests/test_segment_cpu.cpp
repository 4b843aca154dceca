// segment_reduce, aggregate and the CSR builders on the CPU: float64 references, the canonical
// order itself, bitwise determinism over repeats and thread counts, the atomic variant's
// nondeterminism, NaN rules, strided/empty inputs, and bad input that must leave out untouched.
#include "segment_reference.hpp"
#include "testing.hpp"

#include <algorithm>
#include <bit>
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
constexpr Determinism kPo = Determinism::portable;
constexpr Reduce kReduces[] = {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin};

std::vector<std::int64_t> as_int64(const Tensor& t) {
  std::vector<std::int64_t> v;
  for (double d : testing::to_doubles(t))
    v.push_back(static_cast<std::int64_t>(d));
  return v;
}

double tolerance(DType t) {
  return t == DType::f32 ? 2e-5 : 1e-13;
}

class SegmentReduceTest
    : public ::testing::TestWithParam<std::tuple<std::tuple<int, int, int>, DType, Determinism>> {};

TEST_P(SegmentReduceTest, MatchesFloat64Reference) {
  const auto [shape, dtype, level] = GetParam();
  const auto [segs, avg, cols] = shape;
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor off = random_offsets(segs, avg, seed, 7, 3);
  const auto offv = off.to_vector<std::int64_t>();
  Tensor x = testing::random_normal({offv.back(), cols}, dtype, seed + 1);
  const auto xv = testing::to_doubles(x);
  for (Reduce r : kReduces) {
    Tensor out = Tensor::full({segs, cols}, 42.0, dtype);
    segment_reduce(x, off, out, r, {.level = level});
    const auto ref = segment_reference(xv, cols, offv, nullptr, r);
    if (r == Reduce::amax || r == Reduce::amin)
      EXPECT_EQ(testing::to_doubles(out), ref) << "reduce " << static_cast<int>(r);
    else
      EXPECT_LT(testing::relative_error(out, ref), tolerance(dtype))
          << "reduce " << static_cast<int>(r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SegmentReduceTest,
    ::testing::Combine(::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(100, 10, 1),
                                         std::make_tuple(37, 50, 3), std::make_tuple(300, 8, 64),
                                         std::make_tuple(5, 2000, 17)),
                       ::testing::Values(DType::f32, DType::f64), ::testing::Values(kNg, kPo)));

TEST(SegmentReduce, PortableFollowsTheDocumentedOrder) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor off = random_offsets(50, 40, seed, 7, 3);
  const auto o = off.to_vector<std::int64_t>();
  const std::int64_t cols = 5;
  Tensor x = testing::random_normal({o.back(), cols}, DType::f32, seed + 1);
  const float* xp = x.data<float>();
  for (Reduce r : kReduces) {
    Tensor out = Tensor::empty({50, cols}, DType::f32);
    segment_reduce(x, off, out, r, {.level = kPo});
    for (std::int64_t s = 0; s < 50; ++s)
      for (std::int64_t f = 0; f < cols; ++f) {
        float acc = r == Reduce::amax ? -INFINITY : r == Reduce::amin ? INFINITY : 0.0f;
        for (auto k = o[static_cast<std::size_t>(s)]; k < o[static_cast<std::size_t>(s + 1)]; ++k) {
          const float v = xp[k * cols + f];
          if (r == Reduce::amax)
            acc = (v > acc || std::isnan(v)) ? v : acc;
          else if (r == Reduce::amin)
            acc = (v < acc || std::isnan(v)) ? v : acc;
          else
            acc = acc + v;
        }
        const auto n = o[static_cast<std::size_t>(s + 1)] - o[static_cast<std::size_t>(s)];
        if (n == 0)
          acc = 0.0f;
        else if (r == Reduce::mean)
          acc = acc / static_cast<float>(n);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(out.data<float>()[s * cols + f]),
                  std::bit_cast<std::uint32_t>(acc))
            << "segment " << s << " reduce " << static_cast<int>(r);
      }
  }
}

TEST(SegmentReduce, PortableBitwiseOverRepeatsAndThreadCounts) {
  const auto seed = fresh_seed();
  Tensor off = random_offsets(2000, 30, seed, 7, 3);
  Tensor x = testing::random_normal({off.to_vector<std::int64_t>().back(), 24}, DType::f32, seed);
  for (Reduce r : kReduces) {
    std::set<std::uint64_t> hashes;
    for (int threads : {1, 2, 3, 8}) {
      testing::ThreadCount tc(threads);
      for (int rep = 0; rep < 20; ++rep) {
        Tensor out = Tensor::empty({2000, 24}, DType::f32);
        segment_reduce(x, off, out, r, {.level = kPo});
        hashes.insert(content_hash(out));
      }
    }
    EXPECT_EQ(hashes.size(), 1u) << "seed " << seed << " reduce " << static_cast<int>(r);
  }
}

TEST(SegmentReduce, AtomicVariantVariesRunToRun) {
  // Few long segments: every segment spans hundreds of edge chunks whose partials are added in
  // completion order. Two distinct results appear within a few runs with 2+ threads.
  testing::ThreadCount tc(std::max(2, num_threads()));
  Tensor off = Tensor::from_vector<std::int64_t>({0, 300000, 600000}, {3});
  Tensor x = testing::random_normal({600000, 2}, DType::f32, fresh_seed());
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 3000 && hashes.size() < 2; ++r) {
    Tensor out = Tensor::empty({2, 2}, DType::f32);
    segment_reduce(x, off, out, Reduce::sum, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

TEST(SegmentReduce, StridedAndHigherDimInputs) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor off = random_offsets(40, 6, seed, 7, 3);
  const auto offv = off.to_vector<std::int64_t>();
  const std::int64_t e = offv.back();
  Tensor x = testing::random_normal({e, 3, 5}, DType::f64, seed);
  Tensor keep_x, keep_o;
  const TensorView xs = testing::strided_copy(x, keep_x); // every other element of the last dim
  Tensor contiguous_out = Tensor::empty({40, 3, 5}, DType::f64);
  Tensor out_base = Tensor::full({40, 3, 5}, 1.0, DType::f64);
  const TensorView outs = testing::strided_copy(out_base, keep_o);
  for (Reduce r : kReduces)
    for (auto level : {kNg, kPo}) {
      segment_reduce(x, off, contiguous_out, r, {.level = level});
      segment_reduce(xs, off, outs, r, {.level = level});
      EXPECT_LT(testing::relative_error(
                    outs, segment_reference(testing::to_doubles(x), 15, offv, nullptr, r)),
                1e-13);
      if (level == kPo) {
        EXPECT_TRUE(bitwise_equal(contiguous_out, Tensor::copy_of(outs)));
      }
    }
  // Row-strided: the first 7 columns of a wider matrix (collapses to rows with a leading stride).
  Tensor wide = testing::random_normal({e, 11}, DType::f32, seed + 2);
  const TensorView narrow = wide.view().slice(1, 0, 7);
  Tensor a = Tensor::empty({40, 7}, DType::f32), b = Tensor::empty({40, 7}, DType::f32);
  segment_reduce(narrow, off, a, Reduce::sum, {.level = kPo});
  segment_reduce(Tensor::copy_of(narrow), off, b, Reduce::sum, {.level = kPo});
  EXPECT_TRUE(bitwise_equal(a, b));
}

TEST(SegmentReduce, EmptyInputs) {
  for (auto level : {kNg, kPo}) {
    // No segments.
    Tensor off0 = Tensor::from_vector<std::int64_t>({0}, {1});
    Tensor x0 = Tensor::empty({0, 4}, DType::f32), out0 = Tensor::empty({0, 4}, DType::f32);
    segment_reduce(x0, off0, out0, Reduce::sum, {.level = level});
    // Only empty segments: every reduction gives +0.
    Tensor off = Tensor::from_vector<std::int64_t>({0, 0, 0}, {3});
    for (Reduce r : kReduces) {
      Tensor out = Tensor::full({2, 4}, 42.0, DType::f32);
      segment_reduce(x0, off, out, r, {.level = level});
      for (float v : out.to_vector<float>()) {
        EXPECT_EQ(v, 0.0f);
        EXPECT_FALSE(std::signbit(v));
      }
    }
    // Zero columns.
    Tensor offz = Tensor::from_vector<std::int64_t>({0, 2, 3}, {3});
    Tensor xz = Tensor::empty({3, 0}, DType::f32), outz = Tensor::empty({2, 0}, DType::f32);
    segment_reduce(xz, offz, outz, Reduce::mean, {.level = level});
  }
}

TEST(SegmentReduce, NanSumsAreCanonical) {
  // inf + -inf and a NaN with a payload both give the one canonical quiet NaN.
  Tensor off = Tensor::from_vector<std::int64_t>({0, 2, 4}, {3});
  Tensor x = Tensor::from_vector<double>(
      {INFINITY, -INFINITY, 1.0, std::bit_cast<double>(0xfff0000000000123ULL)}, {4});
  for (Reduce r : {Reduce::sum, Reduce::mean}) {
    Tensor out = Tensor::empty({2}, DType::f64);
    segment_reduce(x, off, out, r, {.level = kPo});
    for (double v : out.to_vector<double>())
      EXPECT_EQ(std::bit_cast<std::uint64_t>(v), 0x7ff8000000000000ULL);
  }
}

TEST(SegmentReduce, NanAndSignedZeroRules) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor off = Tensor::from_vector<std::int64_t>({0, 3, 5, 7}, {4});
  Tensor x = Tensor::from_vector<float>({1.0f, nan, 5.0f, -0.0f, 0.0f, 2.0f, -INFINITY}, {7});
  for (auto level : {kNg, kPo}) {
    Tensor mx = Tensor::empty({3}, DType::f32), mn = Tensor::empty({3}, DType::f32);
    segment_reduce(x, off, mx, Reduce::amax, {.level = level});
    segment_reduce(x, off, mn, Reduce::amin, {.level = level});
    EXPECT_TRUE(std::isnan(mx.data<float>()[0]));
    EXPECT_TRUE(std::isnan(mn.data<float>()[0]));
    EXPECT_EQ(mx.data<float>()[2], 2.0f);
    EXPECT_EQ(mn.data<float>()[2], -INFINITY);
    Tensor sm = Tensor::empty({3}, DType::f32);
    segment_reduce(x, off, sm, Reduce::sum, {.level = level});
    EXPECT_EQ(std::bit_cast<std::uint32_t>(sm.data<float>()[0]), 0x7fc00000u); // canonical NaN
    if (level == kPo) { // the first of +0/-0 met is kept
      EXPECT_TRUE(std::signbit(mx.data<float>()[1]));
      EXPECT_TRUE(std::signbit(mn.data<float>()[1]));
    }
  }
}

// --- aggregate ------------------------------------------------------------------------------

struct RandomGraph {
  Tensor src, dst;
};
RandomGraph random_graph(std::int64_t nodes, std::int64_t edges, DType dt, std::uint64_t seed) {
  return {testing::random_index(edges, nodes, dt, seed),
          testing::random_index(edges, nodes, dt, seed + 1)};
}

TEST(Aggregate, MatchesFloat64ReferenceBothIndexTypes) {
  for (DType it : {DType::i32, DType::i64})
    for (std::int64_t cols : {1, 16, 33}) {
      const auto seed = fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed));
      const std::int64_t n = 500;
      auto g = random_graph(n, 3000, it, seed);
      Csr csr = csr_from_edges(g.src, g.dst, n);
      Tensor x = testing::random_normal({n, cols}, DType::f32, seed + 2);
      const auto xv = testing::to_doubles(x);
      const auto offv = csr.offsets.to_vector<std::int64_t>();
      const auto idxv = as_int64(csr.indices);
      for (Reduce r : kReduces)
        for (auto level : {kNg, kPo}) {
          Tensor out = Tensor::full({n, cols}, 42.0, DType::f32);
          aggregate(csr.view(), x, out, r, {.level = level});
          const auto ref = segment_reference(xv, cols, offv, &idxv, r);
          if (r == Reduce::amax || r == Reduce::amin)
            EXPECT_EQ(testing::to_doubles(out), ref);
          else
            EXPECT_LT(testing::relative_error(out, ref), 2e-6);
        }
    }
}

TEST(Aggregate, EqualsSegmentReduceOfGatheredRows) {
  // aggregate == segment_reduce over x[indices] (the materialized edge tensor), bit for bit.
  const auto seed = fresh_seed();
  auto g = random_graph(300, 4000, DType::i64, seed);
  Csr csr = csr_from_edges(g.src, g.dst, 300);
  Tensor x = testing::random_normal({300, 9}, DType::f32, seed);
  Tensor gathered = Tensor::empty({4000, 9}, DType::f32);
  index_select(x, 0, csr.indices, gathered);
  for (Reduce r : kReduces) {
    Tensor a = Tensor::empty({300, 9}, DType::f32), b = Tensor::empty({300, 9}, DType::f32);
    aggregate(csr.view(), x, a, r, {.level = kPo});
    segment_reduce(gathered, csr.offsets, b, r, {.level = kPo});
    EXPECT_TRUE(bitwise_equal(a, b)) << "seed " << seed;
  }
}

TEST(Aggregate, PortableBitwiseOverRepeatsAndThreadCounts) {
  const auto seed = fresh_seed();
  auto g = random_graph(2708, 10556, DType::i32, seed);
  Csr csr = csr_from_edges(g.src, g.dst, 2708);
  Tensor x = testing::random_normal({2708, 16}, DType::f32, seed);
  for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax}) {
    std::set<std::uint64_t> hashes;
    for (int threads : {1, 2, 3, 8}) {
      testing::ThreadCount tc(threads);
      for (int rep = 0; rep < 20; ++rep) {
        Tensor out = Tensor::empty({2708, 16}, DType::f32);
        aggregate(csr.view(), x, out, r, {.level = kPo});
        hashes.insert(content_hash(out));
      }
    }
    EXPECT_EQ(hashes.size(), 1u) << "seed " << seed;
  }
}

TEST(Aggregate, AtomicVariantVariesRunToRun) {
  // A hub: node 0 receives 400k edges, spread over hundreds of edge chunks.
  testing::ThreadCount tc(std::max(2, num_threads()));
  const std::int64_t e = 400000;
  Tensor src = testing::random_index(e, 1000, DType::i64, fresh_seed());
  Tensor dst = Tensor::zeros({e}, DType::i64);
  Csr csr = csr_from_edges(src, dst, 1000);
  Tensor x = testing::random_normal({1000, 3}, DType::f32, fresh_seed());
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 3000 && hashes.size() < 2; ++r) {
    Tensor out = Tensor::empty({1000, 3}, DType::f32);
    aggregate(csr.view(), x, out, Reduce::sum, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

TEST(Aggregate, StridedFeatures) {
  const auto seed = fresh_seed();
  auto g = random_graph(200, 1500, DType::i64, seed);
  Csr csr = csr_from_edges(g.src, g.dst, 200);
  Tensor x = testing::random_normal({200, 12}, DType::f64, seed);
  Tensor keep;
  const TensorView xs = testing::strided_copy(x, keep);
  Tensor a = Tensor::empty({200, 12}, DType::f64), b = Tensor::empty({200, 12}, DType::f64);
  aggregate(csr.view(), x, a, Reduce::mean, {.level = kPo});
  aggregate(csr.view(), xs, b, Reduce::mean, {.level = kPo});
  EXPECT_TRUE(bitwise_equal(a, b));
}

// --- CSR builders ---------------------------------------------------------------------------

TEST(Csr, FromEdgesGroupsByTargetWithSortedSources) {
  // edges (src -> dst): 3->0, 1->0, 2->1, 0->2, 1->2, 1->0
  Tensor src = Tensor::from_vector<std::int64_t>({3, 1, 2, 0, 1, 1}, {6});
  Tensor dst = Tensor::from_vector<std::int64_t>({0, 0, 1, 2, 2, 0}, {6});
  Csr c = csr_from_edges(src, dst, 4);
  EXPECT_EQ(c.offsets.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 3, 4, 6, 6}));
  EXPECT_EQ(c.indices.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 1, 3, 2, 0, 1}));
  EXPECT_EQ(c.num_nodes(), 4);
  EXPECT_EQ(c.num_sources, 4);
  Csr t = transpose(c, 4); // out-neighbours: 0->{2}, 1->{0,0,2}, 2->{1}, 3->{0}
  EXPECT_EQ(t.offsets.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 4, 5, 6}));
  EXPECT_EQ(t.indices.to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 0, 0, 2, 1, 0}));
  Csr tt = transpose(t, 4);
  EXPECT_TRUE(bitwise_equal(tt.offsets, c.offsets));
  EXPECT_TRUE(bitwise_equal(tt.indices, c.indices));
}

TEST(Csr, TransposeIsTheAdjointOfSumAggregation) {
  // <g, A x> == <A^T g, x> for the aggregation operator A (float64, to rounding).
  const auto seed = fresh_seed();
  auto gr = random_graph(400, 3000, DType::i32, seed);
  Csr c = csr_from_edges(gr.src, gr.dst, 400);
  Csr t = transpose(c, 400);
  EXPECT_EQ(t.indices.dtype(), DType::i32);
  Tensor x = testing::random_normal({400, 1}, DType::f64, seed),
         g = testing::random_normal({400, 1}, DType::f64, seed + 1);
  Tensor ax = Tensor::empty({400, 1}, DType::f64), atg = Tensor::empty({400, 1}, DType::f64);
  aggregate(c.view(), x, ax, Reduce::sum);
  aggregate(t.view(), g, atg, Reduce::sum);
  double lhs = 0, rhs = 0;
  for (int i = 0; i < 400; ++i) {
    lhs += g.data<double>()[i] * ax.data<double>()[i];
    rhs += atg.data<double>()[i] * x.data<double>()[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-9 * (std::abs(lhs) + 1));
}

TEST(Csr, BadEdgesThrow) {
  Tensor src = Tensor::from_vector<std::int64_t>({0, 5}, {2});
  Tensor dst = Tensor::from_vector<std::int64_t>({1, 1}, {2});
  EXPECT_THROW(csr_from_edges(src, dst, 5), IndexOutOfRange);
  Tensor neg = Tensor::from_vector<std::int64_t>({0, -1}, {2});
  EXPECT_THROW(csr_from_edges(dst, neg, 5), IndexOutOfRange);
  Tensor short_dst = Tensor::from_vector<std::int64_t>({1}, {1});
  EXPECT_THROW(csr_from_edges(src, short_dst, 9), InvalidArgument);
  Csr c = csr_from_edges(src, dst, 6);
  EXPECT_THROW(transpose(c, 5), IndexOutOfRange); // source 5 does not fit 5 rows
}

// --- bad input --------------------------------------------------------------------------------

TEST(SegmentErrors, BadOffsetsThrowAndLeaveOutputUntouched) {
  Tensor x = testing::random_normal({6, 2}, DType::f32, fresh_seed());
  auto expect_untouched = [](const Tensor& out) {
    for (float v : out.to_vector<float>())
      EXPECT_EQ(v, 42.0f);
  };
  for (auto level : {kNg, kPo}) {
    Options o{.level = level};
    Tensor out = Tensor::full({3, 2}, 42.0, DType::f32);
    EXPECT_THROW(segment_reduce(x, Tensor::from_vector<std::int64_t>({0, 4, 2, 6}, {4}), out,
                                Reduce::sum, o),
                 IndexOutOfRange);
    EXPECT_THROW(segment_reduce(x, Tensor::from_vector<std::int64_t>({0, 2, 4, 5}, {4}), out,
                                Reduce::sum, o),
                 IndexOutOfRange);
    EXPECT_THROW(segment_reduce(x, Tensor::from_vector<std::int64_t>({0, 2, 4, 7}, {4}), out,
                                Reduce::sum, o),
                 IndexOutOfRange);
    EXPECT_THROW(segment_reduce(x, Tensor::from_vector<std::int64_t>({1, 2, 4, 6}, {4}), out,
                                Reduce::sum, o),
                 IndexOutOfRange);
    EXPECT_THROW(
        segment_reduce(x, Tensor::from_vector<std::int64_t>({0, 2, 6}, {3}), out, Reduce::sum, o),
        InvalidArgument);
    EXPECT_THROW(segment_reduce(x, Tensor::from_vector<std::int32_t>({0, 2, 4, 6}, {4}), out,
                                Reduce::sum, o),
                 InvalidArgument);
    Tensor good = Tensor::from_vector<std::int64_t>({0, 2, 4, 6}, {4});
    EXPECT_THROW(segment_reduce(x, good, out, Reduce::prod, o), InvalidArgument);
    EXPECT_THROW(segment_reduce(x, good, Tensor::full({3, 2}, 42.0, DType::f64), Reduce::sum, o),
                 InvalidArgument);
    EXPECT_THROW(segment_reduce(x, good, Tensor::full({3, 3}, 42.0, DType::f32), Reduce::sum, o),
                 InvalidArgument);
    expect_untouched(out);
  }
}

TEST(SegmentErrors, OutOfRangeNeighboursThrowAndLeaveOutputUntouched) {
  Tensor x = testing::random_normal({4, 3}, DType::f32, fresh_seed());
  Tensor off = Tensor::from_vector<std::int64_t>({0, 2, 3}, {3});
  for (auto level : {kNg, kPo})
    for (std::int64_t bad : {4, -1, 1000000}) {
      Tensor idx = Tensor::from_vector<std::int32_t>({0, static_cast<std::int32_t>(bad), 1}, {3});
      Tensor out = Tensor::full({2, 3}, 42.0, DType::f32);
      try {
        aggregate({off, idx}, x, out, Reduce::sum, {.level = level});
        ADD_FAILURE() << "no exception for index " << bad;
      } catch (const IndexOutOfRange& e) {
        EXPECT_NE(std::string(e.what()).find("indices[1]"), std::string::npos) << e.what();
      }
      for (float v : out.to_vector<float>())
        EXPECT_EQ(v, 42.0f);
    }
  // A validated Csr used with an x that has fewer rows than it addresses is checked again.
  Tensor src = Tensor::from_vector<std::int64_t>({0, 9}, {2}),
         dst = Tensor::from_vector<std::int64_t>({1, 1}, {2});
  Csr c = csr_from_edges(src, dst, 10);
  Tensor x2 = testing::random_normal({10, 3}, DType::f32, 1);
  Tensor out2 = Tensor::full({10, 3}, 42.0, DType::f32);
  EXPECT_THROW(aggregate(c.view(), x2.view().slice(0, 0, 5), out2.view(), Reduce::sum),
               IndexOutOfRange);
  EXPECT_THROW(aggregate(c.view(), x, Tensor::full({10, 3}, 42.0, DType::f32), Reduce::sum),
               IndexOutOfRange);
  for (float v : out2.to_vector<float>())
    EXPECT_EQ(v, 42.0f);
}

TEST(Segment, EveryLevelRuns) {
  Tensor x = testing::random_normal({6, 2}, DType::f32, fresh_seed());
  Tensor off = Tensor::from_vector<std::int64_t>({0, 2, 4, 6}, {4});
  for (auto level : {kNg, Determinism::run_to_run, kPo}) {
    Tensor out = Tensor::empty({3, 2}, DType::f32);
    EXPECT_NO_THROW(segment_reduce(x, off, out, Reduce::sum, {.level = level}));
  }
}

} // namespace
} // namespace samebits

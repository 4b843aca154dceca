// index_add, scatter_add, scatter_reduce and the index plan on the CPU: every variant against a
// float64 reference and (portable variants) bitwise against a naive loop that follows the
// documented canonical order; determinism over repeats and thread counts; the atomic variant's
// nondeterminism; include_self semantics for every reduction; bad input leaves output untouched.
#include "testing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace samebits {
namespace {

using testing::fresh_seed;
constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kPo = Determinism::portable;

struct VariantCase {
  const char* name;
  Determinism level;
};
const VariantCase kScatterVariants[] = {{"cpu.atomic", kNg},
                                        {"cpu.sorted_pull", kPo},
                                        {"cpu.target_sweep", kPo},
                                        {"cpu.column_sweep", kPo}};
// Variants that take index vectors only (index_add, or an index expanded across columns).
bool vector_only(const VariantCase& v) {
  return std::string(v.name) == "cpu.sorted_pull" || std::string(v.name) == "cpu.target_sweep";
}

Options force(const VariantCase& v) {
  return Options{.level = v.level, .variant = v.name};
}

// Row-major multi-index helpers for contiguous shapes of up to 4 dims.
std::vector<std::int64_t> unravel(std::int64_t e, const Shape& s) {
  std::vector<std::int64_t> idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    idx[static_cast<std::size_t>(d)] = e % s[static_cast<std::size_t>(d)];
    e /= s[static_cast<std::size_t>(d)];
  }
  return idx;
}
std::int64_t ravel(const std::vector<std::int64_t>& idx, const Shape& s) {
  std::int64_t e = 0;
  for (std::size_t d = 0; d < s.size(); ++d)
    e = e * s[d] + idx[d];
  return e;
}

template <class T> T step(Reduce r, T acc, T c) {
  switch (r) {
  case Reduce::sum:
  case Reduce::mean:
    return acc + c;
  case Reduce::prod:
    return acc * c;
  case Reduce::amax:
    return (c > acc || c != c) ? c : acc;
  case Reduce::amin:
    return (c < acc || c != c) ? c : acc;
  }
  return acc;
}

// The canonical order, naively: positions of the index in row-major order are, for each target,
// in ascending position along dim, so one sequential loop over them is the documented order.
// Works in T (bitwise reference) or in double (accuracy reference, from the same inputs).
template <class T>
std::vector<T> naive_scatter(std::vector<T> out, const Shape& out_shape,
                             const std::vector<std::int64_t>& index, const Shape& index_shape,
                             const std::vector<T>& src, const Shape& src_shape, int dim, Reduce r,
                             bool include_self) {
  std::vector<std::int64_t> count(out.size(), 0);
  for (std::int64_t e = 0; e < static_cast<std::int64_t>(index.size()); ++e) {
    auto p = unravel(e, index_shape);
    const T c = src[static_cast<std::size_t>(ravel(p, src_shape))];
    p[static_cast<std::size_t>(dim)] = index[static_cast<std::size_t>(e)];
    auto& target = out[static_cast<std::size_t>(ravel(p, out_shape))];
    auto& n = count[static_cast<std::size_t>(ravel(p, out_shape))];
    target = (n == 0 && !include_self) ? c : step(r, target, c);
    ++n;
  }
  if (r == Reduce::mean)
    for (std::size_t t = 0; t < out.size(); ++t)
      if (count[t] > 0)
        out[t] = out[t] / static_cast<T>(count[t] + (include_self ? 1 : 0));
  return out;
}

std::vector<std::int64_t> index_values(const Tensor& t) {
  std::vector<std::int64_t> v;
  for (double d : testing::to_doubles(t))
    v.push_back(static_cast<std::int64_t>(d));
  return v;
}

// index_add's index vector as a scatter index of src's shape (the same index on every column).
std::vector<std::int64_t> expand_rows(const std::vector<std::int64_t>& idx, std::int64_t cols) {
  std::vector<std::int64_t> v;
  for (auto i : idx)
    for (std::int64_t c = 0; c < cols; ++c)
      v.push_back(i);
  return v;
}

template <class T> std::vector<T> values(const Tensor& t) {
  if constexpr (std::is_same_v<T, double>)
    return testing::to_doubles(t);
  else
    return Tensor::copy_of(t, Device::cpu()).to_vector<T>();
}

// --- index_add --------------------------------------------------------------------------------

struct AddShape {
  std::int64_t e, n, f;
};

class IndexAddTest : public ::testing::TestWithParam<std::tuple<AddShape, DType, DType>> {};

TEST_P(IndexAddTest, EveryVariantMatchesReferences) {
  const auto [shape, dtype, idx_dtype] = GetParam();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor src = testing::random_normal({shape.e, shape.f}, dtype, seed);
  Tensor index = testing::random_index(shape.e, shape.n, idx_dtype, seed + 1);
  Tensor out0 = testing::random_normal({shape.n, shape.f}, dtype, seed + 2);
  const auto idx = expand_rows(index_values(index), shape.f);
  for (double alpha : {1.0, -0.75}) {
    auto sd = testing::to_doubles(src);
    for (auto& v : sd)
      v *= alpha;
    const auto ref =
        naive_scatter<double>(testing::to_doubles(out0), {shape.n, shape.f}, idx,
                              {shape.e, shape.f}, sd, {shape.e, shape.f}, 0, Reduce::sum, true);
    // The same sums over absolute values: the error is judged against what was added, since a
    // target whose terms cancel (one source of -0.75 x against its start value) has a result far
    // smaller than the rounding of its terms.
    auto abs_of = [](std::vector<double> v) {
      for (auto& x : v)
        x = std::fabs(x);
      return v;
    };
    const auto scale = naive_scatter<double>(abs_of(testing::to_doubles(out0)), {shape.n, shape.f},
                                             idx, {shape.e, shape.f}, abs_of(sd),
                                             {shape.e, shape.f}, 0, Reduce::sum, true);
    std::vector<double> canonical;
    if (dtype == DType::f32) {
      auto sf = values<float>(src);
      if (alpha != 1.0)
        for (auto& v : sf)
          v = static_cast<float>(alpha) * v;
      for (float v :
           naive_scatter<float>(values<float>(out0), {shape.n, shape.f}, idx, {shape.e, shape.f},
                                sf, {shape.e, shape.f}, 0, Reduce::sum, true))
        canonical.push_back(v);
    }
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-13;
    for (const auto& v : kScatterVariants) {
      SCOPED_TRACE(std::string(v.name) + " alpha " + std::to_string(alpha));
      Tensor out = out0.clone();
      index_add(out, index, src, alpha, force(v));
      EXPECT_LT(testing::error_against_scale(out, ref, scale), tol);
      if (v.level == kPo && dtype == DType::f32) {
        EXPECT_EQ(testing::to_doubles(out), canonical);
      }
    }
    Tensor out = out0.clone();
    const IndexPlan plan = make_index_plan(index, shape.n);
    index_add(out, plan, src, alpha);
    EXPECT_LT(testing::error_against_scale(out, ref, scale), tol);
    if (dtype == DType::f32) {
      EXPECT_EQ(testing::to_doubles(out), canonical);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, IndexAddTest,
    ::testing::Combine(::testing::Values(AddShape{0, 5, 3}, AddShape{1, 1, 1},
                                         AddShape{1000, 10, 1}, AddShape{5000, 300, 7},
                                         AddShape{20000, 50, 64}, AddShape{3000, 1, 2},
                                         AddShape{200000, 70000, 1}),
                       ::testing::Values(DType::f32, DType::f64),
                       ::testing::Values(DType::i32, DType::i64)));

TEST(IndexAdd, StridedInputsAndOutput) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tensor src = testing::random_normal({3000, 9}, DType::f32, seed);
  Tensor index = testing::random_index(6000, 40, DType::i64, seed + 1);
  Tensor out0 = testing::random_normal({40, 9}, DType::f32, seed + 2);
  TensorView idx_strided = index.view().slice(0, 0, 6000, 2); // stride 2
  Tensor idx_c = Tensor::copy_of(idx_strided);
  Tensor keep_src, keep_out;
  TensorView src_s = testing::strided_copy(src, keep_src);
  for (const auto& v : kScatterVariants) {
    SCOPED_TRACE(v.name);
    Tensor expect = out0.clone();
    index_add(expect, idx_c, src, 1.0, {.level = kPo});
    TensorView out_s = testing::strided_copy(out0, keep_out);
    index_add(out_s, idx_strided, src_s, 1.0, force(v));
    if (v.level == kPo)
      EXPECT_TRUE(bitwise_equal(out_s, expect));
    else
      EXPECT_LT(testing::relative_error(out_s, testing::to_doubles(expect)), 1e-5);
    // The gaps of the strided output are untouched (still NaN).
    for (double g : testing::to_doubles(keep_out.view().slice(1, 1, 18, 2)))
      EXPECT_TRUE(std::isnan(g));
  }
}

TEST(IndexAdd, OneDimensionalAndEmpty) {
  Tensor src = testing::random_normal({50}, DType::f64, fresh_seed());
  Tensor index = testing::random_index(50, 7, DType::i32, fresh_seed());
  Tensor out = Tensor::full({7}, 1.0, DType::f64);
  index_add(out, index, src);
  double total = 0;
  for (double v : testing::to_doubles(out))
    total += v;
  double expect = 7;
  for (double v : testing::to_doubles(src))
    expect += v;
  EXPECT_NEAR(total, expect, 1e-12);
  for (const auto& v : kScatterVariants) {
    Tensor e_out = Tensor::full({0, 4}, 1.0, DType::f32);
    index_add(e_out, Tensor::empty({0}, DType::i64), Tensor::empty({0, 4}, DType::f32), 1.0,
              force(v));
    Tensor o2 = Tensor::full({3, 0}, 1.0, DType::f32);
    index_add(o2, Tensor::full({5}, 1.0, DType::i64), Tensor::empty({5, 0}, DType::f32), 1.0,
              force(v));
  }
}

TEST(IndexAdd, DeterministicOverRepeatsAndThreadCounts) {
  const auto seed = fresh_seed();
  Tensor src1 = testing::random_normal({300000, 1}, DType::f32, seed);
  Tensor idx1 = testing::random_index(300000, 1000, DType::i64, seed + 1);
  Tensor src2 = testing::random_normal({20000, 40}, DType::f32, seed + 2);
  Tensor idx2 = testing::random_index(20000, 500, DType::i32, seed + 3);
  for (const char* variant : {"cpu.sorted_pull", "cpu.target_sweep", "cpu.column_sweep", "plan"}) {
    std::set<std::uint64_t> h1, h2;
    for (int threads : {1, 2, 3, 8}) {
      testing::ThreadCount tc(threads);
      const IndexPlan p1 = make_index_plan(idx1, 1000), p2 = make_index_plan(idx2, 500);
      for (int r = 0; r < 20; ++r) {
        Tensor o1 = Tensor::full({1000, 1}, 0.5, DType::f32),
               o2 = Tensor::full({500, 40}, 0.5, DType::f32);
        if (std::string(variant) == "plan") {
          index_add(o1, p1, src1);
          index_add(o2, p2, src2);
        } else {
          index_add(o1, idx1, src1, 1.0, {.level = kPo, .variant = variant});
          index_add(o2, idx2, src2, 1.0, {.level = kPo, .variant = variant});
        }
        h1.insert(content_hash(o1));
        h2.insert(content_hash(o2));
      }
    }
    EXPECT_EQ(h1.size(), 1u) << variant << " seed " << seed;
    EXPECT_EQ(h2.size(), 1u) << variant << " seed " << seed;
  }
}

TEST(IndexAdd, AtomicVariantVariesRunToRun) {
  // Documents the problem: with 2+ threads, many adds into few targets land in thread order.
  testing::ThreadCount tc(std::max(2, num_threads()));
  Tensor src = testing::random_normal({1 << 20, 1}, DType::f32, fresh_seed());
  Tensor index = testing::random_index(1 << 20, 4, DType::i64, fresh_seed());
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 2000 && hashes.size() < 2; ++r) {
    Tensor out = Tensor::zeros({4, 1}, DType::f32);
    index_add(out, index, src, 1.0, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

TEST(IndexAdd, SelectionPicksAtomicOnlyAtNotGuaranteed) {
  Tensor src = testing::random_normal({10, 2}, DType::f32, 1);
  Tensor index = testing::random_index(10, 3, DType::i64, 2);
  Tensor out = Tensor::zeros({3, 2}, DType::f32);
  index_add(out, index, src, 1.0, {.level = kNg});
  EXPECT_NE(last_explain().find("cpu.atomic"), std::string::npos) << last_explain();
  for (auto level : {Determinism::run_to_run, kPo}) {
    index_add(out, index, src, 1.0, {.level = level});
    EXPECT_NE(last_explain().find("cpu.target_sweep"), std::string::npos) << last_explain();
  }
}

// --- the plan ---------------------------------------------------------------------------------

TEST(IndexPlan, IsTheStableSortAndSameForEveryThreadCount) {
  const auto seed = fresh_seed();
  Tensor index = testing::random_index(500000, 3000, DType::i32, seed);
  const auto idx = index_values(index);
  std::vector<std::int64_t> order(idx.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
    return idx[static_cast<std::size_t>(a)] < idx[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> offsets(3001, 0);
  for (auto i : idx)
    ++offsets[static_cast<std::size_t>(i + 1)];
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  for (int threads : {1, 2, 3, 8}) {
    testing::ThreadCount tc(threads);
    const IndexPlan p = make_index_plan(index, 3000);
    EXPECT_EQ(p.order.to_vector<std::int64_t>(), order)
        << "threads " << threads << " seed " << seed;
    EXPECT_EQ(p.offsets.to_vector<std::int64_t>(), offsets) << "threads " << threads;
    EXPECT_EQ(p.num_sources, 500000);
    EXPECT_EQ(p.num_targets, 3000);
  }
  const IndexPlan empty = make_index_plan(Tensor::empty({0}, DType::i64), 4);
  EXPECT_EQ(empty.offsets.to_vector<std::int64_t>(), std::vector<std::int64_t>(5, 0));
}

TEST(IndexPlan, ReportsTheFirstBadPosition) {
  Tensor index = testing::random_index(300000, 100, DType::i64, fresh_seed());
  index.data<std::int64_t>()[250000] = 100;
  index.data<std::int64_t>()[260000] = -1;
  try {
    make_index_plan(index, 100);
    FAIL() << "no error";
  } catch (const IndexOutOfRange& e) {
    EXPECT_NE(std::string(e.what()).find("position 250000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("make_index_plan"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_index_plan(index, -1), InvalidArgument);
  EXPECT_THROW(make_index_plan(Tensor::zeros({3, 2}, DType::i64), 4), InvalidArgument);
  EXPECT_THROW(make_index_plan(Tensor::zeros({3}, DType::f32), 4), InvalidArgument);
}

// No targets at all: every index is out of range, whichever variant runs.
TEST(IndexPlan, NoTargetsMeansEveryIndexIsOutOfRange) {
  Tensor index = testing::random_index(5000, 10, DType::i64, fresh_seed());
  Tensor src = testing::random_normal({5000, 1}, DType::f32, fresh_seed());
  EXPECT_THROW(make_index_plan(index, 0), IndexOutOfRange);
  for (const auto& v : kScatterVariants) {
    Tensor none = Tensor::empty({0, 1}, DType::f32);
    EXPECT_THROW(index_add(none, index, src, 1.0, force(v)), IndexOutOfRange) << v.name;
  }
}

TEST(IndexPlan, MismatchedPlanIsRejected) {
  Tensor index = testing::random_index(100, 10, DType::i64, 1);
  const IndexPlan p = make_index_plan(index, 10);
  Tensor out = Tensor::zeros({11, 2}, DType::f32);
  const auto before = content_hash(out);
  EXPECT_THROW(index_add(out, p, Tensor::zeros({100, 2}, DType::f32)), InvalidArgument);
  Tensor out10 = Tensor::zeros({10, 2}, DType::f32);
  EXPECT_THROW(index_add(out10, p, Tensor::zeros({99, 2}, DType::f32)), InvalidArgument);
  EXPECT_EQ(content_hash(out), before);
}

// --- scatter_add / scatter_reduce ---------------------------------------------------------------

struct ScatterCase {
  Shape out, index, src;
  int dim;
};

const ScatterCase kCases[] = {
    {{50}, {400}, {400}, 0},
    {{30, 8}, {500, 8}, {500, 8}, 0},
    {{30, 8}, {500, 5}, {600, 9}, 0}, // index smaller than src and out
    {{6, 40}, {6, 300}, {6, 300}, 1},
    {{4, 7, 9}, {4, 50, 9}, {4, 50, 9}, 1},
    {{3, 5, 6, 11}, {2, 4, 6, 30}, {3, 4, 6, 30}, 3},
    {{3, 5, 6, 11}, {3, 5, 40, 11}, {3, 5, 40, 11}, 2},
    {{9, 1}, {0, 1}, {0, 1}, 0}, // empty
};

template <class T>
std::vector<T> naive_case(const ScatterCase& c, const Tensor& out, const Tensor& index,
                          const Tensor& src, Reduce r, bool self) {
  // src values restricted to the index's shape, in the index's row-major order.
  return naive_scatter<T>(values<T>(out), c.out, index_values(index), c.index, values<T>(src),
                          c.src, c.dim, r, self);
}

class ScatterTest : public ::testing::TestWithParam<std::tuple<int, Reduce, bool>> {};

TEST_P(ScatterTest, EveryVariantMatchesReferences) {
  const auto [case_no, reduce, self] = GetParam();
  const ScatterCase& c = kCases[case_no];
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // Values near 1 for prod (so products neither vanish nor blow up), normal otherwise.
  auto make = [&](const Shape& s, std::uint64_t sd) {
    return reduce == Reduce::prod ? testing::random_uniform(s, DType::f32, 0.9, 1.1, sd)
                                  : testing::random_normal(s, DType::f32, sd);
  };
  Tensor src = make(c.src, seed), out0 = make(c.out, seed + 1);
  Tensor index = testing::random_index(
      std::accumulate(c.index.begin(), c.index.end(), std::int64_t{1}, std::multiplies<>()),
      c.out[static_cast<std::size_t>(c.dim)], DType::i64, seed + 2);
  index = Tensor::copy_of(index.view().reshape(c.index));
  const auto canonical = naive_case<float>(c, out0, index, src, reduce, self);
  const auto ref = naive_case<double>(c, out0, index, src, reduce, self);
  Tensor keep_out, keep_src;
  for (const auto& v : kScatterVariants)
    for (bool strided : {false, true}) {
      if (vector_only(v))
        continue; // takes index vectors only (below)
      SCOPED_TRACE(std::string(v.name) + (strided ? " strided" : ""));
      Tensor out = out0.clone();
      TensorView o = strided ? testing::strided_copy(out0, keep_out) : out.view();
      TensorView s = strided ? testing::strided_copy(src, keep_src) : src.view();
      scatter_reduce(o, c.dim, index, s, reduce, self, force(v));
      if (v.level == kPo)
        EXPECT_EQ(values<float>(Tensor::copy_of(o)), canonical);
      else
        EXPECT_LT(testing::relative_error(o, ref), 1e-5);
      if (reduce == Reduce::sum && self) {
        Tensor o2 = out0.clone();
        scatter_add(o2, c.dim, index, src, force(v));
        if (v.level == kPo) {
          EXPECT_EQ(values<float>(o2), canonical);
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScatterTest,
    ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kCases))),
                       ::testing::Values(Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin,
                                         Reduce::prod),
                       ::testing::Bool()));

// An index expanded from a vector (stride 0 across columns) takes the target sweep; every variant
// still follows the same order.
TEST(ScatterReduce, ExpandedIndexEveryReduceEveryVariant) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t e = 4000, n = 60, f = 12;
  Tensor vec = testing::random_index(e, n, DType::i32, seed);
  const TensorView expanded = testing::expanded_index(vec, {e, f});
  Tensor dense = Tensor::copy_of(expanded);
  Tensor src = testing::random_uniform({e, f}, DType::f64, 0.99, 1.01, seed + 1);
  Tensor out0 = testing::random_normal({n, f}, DType::f64, seed + 2);
  for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax, Reduce::amin, Reduce::prod})
    for (bool self : {false, true}) {
      Tensor expect = out0.clone();
      scatter_reduce(expect, 0, dense, src, r, self, {.level = kPo, .variant = "cpu.column_sweep"});
      for (const auto& v : kScatterVariants) {
        Tensor out = out0.clone();
        scatter_reduce(out, 0, expanded, src, r, self, force(v));
        if (v.level == kPo)
          EXPECT_TRUE(bitwise_equal(out, expect)) << v.name << " " << to_string(r) << " " << self;
        else
          EXPECT_LT(testing::relative_error(out, testing::to_doubles(expect)), 1e-12);
      }
      scatter_reduce(out0.clone(), 0, expanded, src, r, self, {.level = kPo});
      EXPECT_NE(last_explain().find("cpu.target_sweep"), std::string::npos) << last_explain();
    }
}

TEST(ScatterReduce, IncludeSelfSemanticsByHand) {
  // out = [10, 20, 30]; sources 1, 2, 3, 4 to targets 0, 0, 2, 0; target 1 receives nothing.
  Tensor src = Tensor::from_vector<double>({1, 2, 3, 4}, {4});
  Tensor index = Tensor::from_vector<std::int64_t>({0, 0, 2, 0}, {4});
  struct Expect {
    Reduce r;
    bool self;
    std::vector<double> v;
  };
  const Expect cases[] = {
      {Reduce::sum, true, {17, 20, 33}},
      {Reduce::sum, false, {7, 20, 3}},
      {Reduce::mean, true, {17.0 / 4, 20, 33.0 / 2}},
      {Reduce::mean, false, {7.0 / 3, 20, 3}},
      {Reduce::prod, true, {80, 20, 90}},
      {Reduce::prod, false, {8, 20, 3}},
      {Reduce::amax, true, {10, 20, 30}},
      {Reduce::amax, false, {4, 20, 3}},
      {Reduce::amin, true, {1, 20, 3}},
      {Reduce::amin, false, {1, 20, 3}},
  };
  for (const auto& c : cases)
    for (const auto& v : kScatterVariants) {
      Tensor out = Tensor::from_vector<double>({10, 20, 30}, {3});
      scatter_reduce(out, 0, index, src, c.r, c.self, force(v));
      EXPECT_EQ(testing::to_doubles(out), c.v)
          << to_string(c.r) << " self " << c.self << " " << v.name;
    }
}

TEST(ScatterReduce, NanPropagatesInAmaxAndAmin) {
  Tensor src = Tensor::from_vector<float>({1, std::nanf(""), 3}, {3});
  Tensor index = Tensor::from_vector<std::int64_t>({0, 0, 0}, {3});
  for (Reduce r : {Reduce::amax, Reduce::amin, Reduce::sum})
    for (const auto& v : kScatterVariants) {
      Tensor out = Tensor::from_vector<float>({2}, {1});
      scatter_reduce(out, 0, index, src, r, true, force(v));
      EXPECT_TRUE(std::isnan(out.data<float>()[0])) << to_string(r) << " " << v.name;
    }
}

TEST(ScatterReduce, DeterministicOverRepeatsAndThreadCounts) {
  const auto seed = fresh_seed();
  Tensor src = testing::random_normal({4, 3000, 33}, DType::f32, seed);
  Tensor index = testing::random_index(4 * 3000 * 33, 200, DType::i64, seed + 1);
  index = Tensor::copy_of(index.view().reshape({4, 3000, 33}));
  for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::amax}) {
    std::set<std::uint64_t> hashes;
    for (int threads : {1, 2, 3, 8}) {
      testing::ThreadCount tc(threads);
      for (int rep = 0; rep < 20; ++rep) {
        Tensor out = Tensor::full({4, 200, 33}, 0.25, DType::f32);
        scatter_reduce(out, 1, index, src, r, rep % 2 == 0, {.level = kPo});
        hashes.insert(content_hash(out) ^ static_cast<std::uint64_t>(rep % 2));
      }
    }
    EXPECT_EQ(hashes.size(), 2u) << to_string(r) << " seed " << seed;
  }
}

TEST(ScatterAdd, AtomicVariantVariesRunToRun) {
  testing::ThreadCount tc(std::max(2, num_threads()));
  Tensor src = testing::random_normal({1 << 19, 2}, DType::f32, fresh_seed());
  Tensor index = testing::random_index(1 << 20, 3, DType::i64, fresh_seed());
  index = Tensor::copy_of(index.view().reshape({1 << 19, 2}));
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 2000 && hashes.size() < 2; ++r) {
    Tensor out = Tensor::zeros({3, 2}, DType::f32);
    scatter_add(out, 0, index, src, {.level = kNg});
    hashes.insert(content_hash(out));
  }
  EXPECT_GE(hashes.size(), 2u);
}

// --- bad input ----------------------------------------------------------------------------------

TEST(ScatterErrors, OutOfRangeIndexWritesNothing) {
  for (std::int64_t bad : {-1, 10, 1000}) {
    Tensor src = testing::random_normal({5000, 3}, DType::f32, fresh_seed());
    Tensor index = testing::random_index(5000, 10, DType::i64, fresh_seed());
    index.data<std::int64_t>()[4321] = bad;
    const TensorView expanded{index.view().data, DType::i64,  Device::cpu(), 2,
                              {5000, 3, 0, 0},   {1, 0, 0, 0}};
    for (const auto& v : kScatterVariants) {
      Tensor out = testing::random_normal({10, 3}, DType::f32, 5);
      const auto before = content_hash(out);
      try {
        index_add(out, index, src, 1.0, force(v));
        ADD_FAILURE() << "no error";
      } catch (const IndexOutOfRange& e) {
        EXPECT_NE(std::string(e.what()).find("index_add"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("position 4321"), std::string::npos) << e.what();
      }
      EXPECT_EQ(content_hash(out), before) << v.name;
      for (Reduce r : {Reduce::sum, Reduce::mean, Reduce::prod}) {
        EXPECT_THROW(scatter_reduce(out, 0, expanded, src, r, false, force(v)), IndexOutOfRange)
            << v.name;
        EXPECT_EQ(content_hash(out), before) << v.name;
      }
      if (!vector_only(v)) {
        EXPECT_THROW(scatter_add(out, 0, Tensor::copy_of(expanded), src, force(v)),
                     IndexOutOfRange);
        EXPECT_EQ(content_hash(out), before) << v.name;
      }
    }
  }
}

TEST(ScatterErrors, ShapeDtypeDeviceMismatchesWriteNothing) {
  Tensor out = testing::random_normal({10, 3}, DType::f32, 5);
  const auto before = content_hash(out);
  Tensor src = testing::random_normal({20, 3}, DType::f32, 6);
  Tensor index = testing::random_index(20, 10, DType::i64, 7);
  EXPECT_THROW(index_add(out, index, testing::random_normal({20, 4}, DType::f32, 1)),
               InvalidArgument);
  EXPECT_THROW(index_add(out, index, testing::random_normal({20, 3}, DType::f64, 1)),
               InvalidArgument);
  EXPECT_THROW(index_add(out, index, testing::random_normal({19, 3}, DType::f32, 1)),
               InvalidArgument);
  EXPECT_THROW(index_add(out, Tensor::zeros({20}, DType::f32), src), InvalidArgument);
  EXPECT_THROW(scatter_add(out, 0, Tensor::zeros({20, 4}, DType::i64), src), InvalidArgument);
  EXPECT_THROW(scatter_add(out, 2, Tensor::zeros({20, 3}, DType::i64), src), InvalidArgument);
  EXPECT_THROW(scatter_add(out, 0, Tensor::zeros({20}, DType::i64), src), InvalidArgument);
  EXPECT_THROW(scatter_reduce(out, 1, Tensor::zeros({11, 3}, DType::i64), src, Reduce::sum),
               InvalidArgument);
  EXPECT_THROW(scatter_reduce(Tensor::zeros({10, 3}, DType::i32), 0,
                              Tensor::zeros({20, 3}, DType::i64),
                              Tensor::zeros({20, 3}, DType::i32), Reduce::sum),
               InvalidArgument);
  EXPECT_THROW(parse_reduce("median"), InvalidArgument);
  EXPECT_EQ(parse_reduce("max"), Reduce::amax);
  EXPECT_EQ(content_hash(out), before);
}

} // namespace
} // namespace samebits

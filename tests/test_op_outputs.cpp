// The output contract every op shares: an output that reaches an element twice, or shares memory
// with an input, is refused before anything is written (threads would race on it, or read what
// the op already wrote); cumsum alone also runs in place. And copy() between overlapping views.
#include "core/overlap.hpp"
#include "core/strided.hpp"
#include "samebits/samebits.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace samebits {
namespace {

using testing::fresh_seed;

// `t` seen with stride 0 along `d`: every index along d is the same element.
TensorView stride_zero(const Tensor& t, int d) {
  TensorView v = t.view();
  v.strides[static_cast<std::size_t>(d)] = 0;
  return v;
}

// `f` must throw InvalidArgument with `needle` in its message and leave `untouched` as it was.
void expect_refused(const std::function<void()>& f, const std::string& needle,
                    const Tensor& untouched) {
  const Tensor before = untouched.clone();
  try {
    f();
    ADD_FAILURE() << "accepted; expected an InvalidArgument with '" << needle << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_TRUE(bitwise_equal(before, untouched)) << needle << ": written before the refusal";
}

constexpr Determinism kLevels[] = {Determinism::not_guaranteed, Determinism::run_to_run,
                                   Determinism::portable};

TEST(OpOutputs, AnOutputThatReachesAnElementTwiceIsRefused) {
  const auto seed = fresh_seed();
  Tensor src = testing::random_normal({8, 32}, DType::f32, seed);
  Tensor rows = testing::random_normal({8, 32}, DType::f32, seed + 1); // seen as 8 rows in 1
  Tensor square = testing::random_normal({8, 8}, DType::f32, seed + 2);
  Tensor line = testing::random_normal({32}, DType::f32, seed + 3);
  Tensor offsets = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}, {9});
  Tensor index = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8});
  Tensor bins = testing::random_index(100, 32, DType::i64, seed + 4);
  Tensor weights = testing::random_normal({100}, DType::f32, seed + 5);
  for (Determinism level : kLevels) {
    SCOPED_TRACE(std::string(to_string(level)));
    const Options o{.level = level};
    expect_refused([&] { segment_reduce(src, offsets, stride_zero(rows, 0), Reduce::sum, o); },
                   "segment_reduce: out reaches some element twice", rows);
    expect_refused([&] { index_add(stride_zero(rows, 0), index, src, 1.0, o); },
                   "index_add: out reaches some element twice", rows);
    expect_refused(
        [&] {
          scatter_add(stride_zero(rows, 0), 0, testing::expanded_index(index, {8, 32}), src, o);
        },
        "scatter_add: out reaches some element twice", rows);
    expect_refused([&] { index_select(src, 0, index, stride_zero(rows, 0), o); },
                   "index_select: out reaches some element twice", rows);
    expect_refused([&] { cumsum(src, 1, stride_zero(rows, 0), o); },
                   "cumsum: out reaches some element twice", rows);
    expect_refused([&] { sum_dim(src, 0, stride_zero(line, 0), o); },
                   "sum_dim: out reaches some element twice", line);
    expect_refused([&] { bincount(bins, weights, stride_zero(line, 0), o); },
                   "bincount: out reaches some element twice", line);
    expect_refused(
        [&] { gemm(Transpose::no, Transpose::yes, 1.0, src, src, 0.0, stride_zero(square, 1), o); },
        "gemm: c reaches some element twice", square);
  }
}

TEST(OpOutputs, AnOutputThatSharesMemoryWithAnInputIsRefused) {
  const auto seed = fresh_seed();
  Tensor buffer = testing::random_normal({16, 32}, DType::f32, seed);
  const TensorView top = buffer.view().slice(0, 0, 8), middle = buffer.view().slice(0, 4, 12);
  Tensor index = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8});
  Tensor offsets = Tensor::from_vector(std::vector<std::int64_t>{0, 2, 4, 6, 8, 8, 8, 8, 8}, {9});
  Tensor sum_buffer = testing::random_normal({100}, DType::f32, seed + 1);
  for (Determinism level : kLevels) {
    SCOPED_TRACE(std::string(to_string(level)));
    const Options o{.level = level};
    expect_refused([&] { index_add(middle, index, top, 1.0, o); },
                   "index_add: out shares memory with src", buffer);
    expect_refused([&] { segment_reduce(top, offsets, middle, Reduce::sum, o); },
                   "segment_reduce: out shares memory with src", buffer);
    expect_refused([&] { index_select(top, 0, index, middle, o); },
                   "index_select: out shares memory with x", buffer);
    expect_refused([&] { cumsum(top, 0, middle, o); }, "cumsum: out shares memory with x", buffer);
    expect_refused([&] { sum(sum_buffer, sum_buffer.view().slice(0, 50, 51), o); },
                   "sum: out shares memory with x", sum_buffer);
    expect_refused(
        [&] {
          gemm(Transpose::no, Transpose::no, 1.0, buffer.view().slice(0, 0, 4).slice(1, 0, 4),
               buffer.view().slice(0, 4, 8).slice(1, 0, 4), 0.0,
               buffer.view().slice(0, 2, 6).slice(1, 0, 4), o);
        },
        "gemm: c shares memory with a", buffer);
  }
  // An index that shares the output's memory is refused too.
  Tensor ints = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8});
  expect_refused([&] { bincount(ints, TensorView{}, ints, {}); },
                 "bincount: out shares memory with index", ints);
  // Disjoint halves of one buffer are separate tensors.
  EXPECT_NO_THROW(
      index_add(buffer.view().slice(0, 8, 16), index, top, 1.0, {.level = Determinism::portable}));
}

TEST(OpOutputs, CumsumRunsInPlace) {
  Tensor x = testing::random_normal({40, 30}, DType::f64, fresh_seed());
  for (Determinism level : kLevels) {
    Tensor want = Tensor::empty({40, 30}, DType::f64);
    cumsum(x, 1, want, {.level = Determinism::portable});
    Tensor in_place = x.clone();
    cumsum(in_place, 1, in_place, {.level = level});
    if (level == Determinism::not_guaranteed)
      continue; // its order may differ; it must still run
    EXPECT_TRUE(bitwise_equal(in_place, want)) << to_string(level);
  }
}

// The index of index_add is checked even where src has no element per row (no kernel meets it).
TEST(OpOutputs, IndexAddChecksItsIndexWithoutFeatures) {
  Tensor out = Tensor::empty({5, 0}, DType::f32), src = Tensor::empty({3, 0}, DType::f32);
  Tensor index = Tensor::from_vector(std::vector<std::int64_t>{0, 7, 1}, {3});
  try {
    index_add(out, index, src, 1.0, {.level = Determinism::portable});
    ADD_FAILURE() << "an index of 7 into 5 rows was accepted";
  } catch (const IndexOutOfRange& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "index_add: index 7 at position 1 is out of range [0, 5); nothing was written"),
              std::string::npos)
        << e.what();
  }
  index.data<std::int64_t>()[1] = 4;
  EXPECT_NO_THROW(index_add(out, index, src, 1.0, {.level = Determinism::portable}));
}

// copy() between overlapping views: dst gets src's values as they were before the copy.
TEST(Copy, OverlappingViewsCopyFromASnapshot) {
  auto ramp = [] {
    std::vector<float> v(16);
    for (int i = 0; i < 16; ++i)
      v[static_cast<std::size_t>(i)] = static_cast<float>(i);
    return Tensor::from_vector(v, {16});
  };
  // Strided: x[2], x[4], x[6] <- x[0], x[2], x[4].
  Tensor x = ramp();
  const TensorView evens = x.view().slice(0, 0, 8);
  TensorView src = evens, dst = evens;
  src.shape[0] = dst.shape[0] = 3;
  src.strides[0] = dst.strides[0] = 2;
  dst.data = x.data<float>() + 2;
  copy(src, dst);
  EXPECT_EQ(x.to_vector<float>()[2], 0.0f);
  EXPECT_EQ(x.to_vector<float>()[4], 2.0f);
  EXPECT_EQ(x.to_vector<float>()[6], 4.0f);
  // Contiguous, shifting right and left.
  Tensor r = ramp();
  copy(r.view().slice(0, 0, 12), r.view().slice(0, 4, 16));
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(r.to_vector<float>()[static_cast<std::size_t>(i)], i < 4 ? i : i - 4);
  Tensor l = ramp();
  copy(l.view().slice(0, 4, 16), l.view().slice(0, 0, 12));
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(l.to_vector<float>()[static_cast<std::size_t>(i)], i < 12 ? i + 4 : i);
  // A view onto itself is left as it is.
  Tensor same = ramp();
  copy(same, same);
  EXPECT_TRUE(bitwise_equal(same, ramp()));
}

// fill and full convert to integer dtypes only values those can hold.
TEST(Fill, IntegerDtypesRefuseValuesTheyCannotHold) {
  EXPECT_THROW(Tensor::full({3}, 3e9, DType::i32), InvalidArgument);
  EXPECT_THROW(Tensor::full({3}, -2147483649.0, DType::i32), InvalidArgument);
  EXPECT_THROW(Tensor::full({3}, std::nan(""), DType::i64), InvalidArgument);
  EXPECT_THROW(Tensor::full({3}, 9.3e18, DType::i64), InvalidArgument);
  EXPECT_EQ(Tensor::full({1}, -2147483648.0, DType::i32).to_vector<std::int32_t>()[0], INT32_MIN);
  EXPECT_EQ(Tensor::full({1}, 2147483647.9, DType::i32).to_vector<std::int32_t>()[0], INT32_MAX);
  EXPECT_EQ(Tensor::full({1}, -9223372036854775808.0, DType::i64).to_vector<std::int64_t>()[0],
            INT64_MIN);
  EXPECT_EQ(Tensor::full({1}, -2.7, DType::i64).to_vector<std::int64_t>()[0], -2);
  EXPECT_NO_THROW(Tensor::full({2}, std::nan(""), DType::f32));
  EXPECT_THROW(Tensor::full({0}, 1e300, DType::i32), InvalidArgument)
      << "refused before looking at the size";
}

// fill writes a host view in any layout, one with a negative stride included (a view the ops refuse
// as an output, but fill walks its elements where they are), and leaves the bytes between them.
TEST(Fill, HostViewsOfEveryLayoutIncludingNegativeStrides) {
  Tensor rows = Tensor::zeros({3, 5}, DType::f64);
  TensorView backwards = rows.view().slice(1, 0, 5, 2); // [3, 3], strides (5, 2)
  backwards.data = rows.data<double>() + 10;            // row 2 first
  backwards.strides[0] = -5;
  fill(backwards, 4.0);
  const std::vector<double> want = {4, 0, 4, 0, 4, 4, 0, 4, 0, 4, 4, 0, 4, 0, 4};
  EXPECT_EQ(rows.to_vector<double>(), want);
  Tensor t = Tensor::zeros({4, 3}, DType::f32);
  fill(t.view().transpose(0, 1), -1.5);
  for (float v : t.to_vector<float>())
    ASSERT_EQ(v, -1.5f);
}

// Views of one buffer that share no element are separate tensors: column blocks (a GNN's concat),
// interleaved and step-sliced views.
TEST(OpOutputs, ViewsThatShareNoElementAreAccepted) {
  Tensor buf = testing::random_normal({6, 10}, DType::f64, fresh_seed());
  const Tensor copy = buf.clone();
  Tensor want = Tensor::empty({6, 5}, DType::f64);
  cumsum(copy.view().slice(1, 0, 5), 1, want, {.level = Determinism::portable});
  cumsum(buf.view().slice(1, 0, 5), 1, buf.view().slice(1, 5, 10),
         {.level = Determinism::portable});
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(buf.view().slice(1, 5, 10)), want)) << "column blocks";
  Tensor evens = Tensor::empty({6, 5}, DType::f64);
  cumsum(copy.view().slice(1, 0, 10, 2), 1, evens, {.level = Determinism::portable});
  Tensor inter = copy.clone();
  cumsum(inter.view().slice(1, 0, 10, 2), 1, inter.view().slice(1, 1, 10, 2),
         {.level = Determinism::portable});
  EXPECT_TRUE(bitwise_equal(Tensor::copy_of(inter.view().slice(1, 1, 10, 2)), evens))
      << "interleaved";
  // A step that does not divide the row: [3, 5] seen as [3, 3] with strides (5, 2).
  Tensor rows = Tensor::zeros({3, 5}, DType::f64);
  Tensor x = testing::random_normal({3, 3}, DType::f64, fresh_seed());
  EXPECT_NO_THROW(cumsum(x, 1, rows.view().slice(1, 0, 5, 2), {.level = Determinism::portable}));
  // An output with a negative stride is refused as such.
  TensorView backwards = rows.view().slice(0, 0, 3);
  backwards.data = rows.data<double>() + 10;
  backwards.strides[0] = -5;
  try {
    cumsum(Tensor::copy_of(rows.view()), 1, backwards, {});
    ADD_FAILURE() << "a negative stride was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("negative strides are not supported"), std::string::npos)
        << e.what();
  }
}

// views_overlap against brute force: random views (sizes, steps, offsets, transposes) of one
// buffer, the answer exact where both have the same strides and never a miss otherwise.
TEST(Overlap, ViewsOverlapAgreesWithBruteForce) {
  std::vector<float> storage(400);
  std::uint64_t state = fresh_seed();
  auto next = [&](std::int64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(n));
  };
  auto random_view = [&](const Shape& layout_shape) {
    TensorView v = TensorView::of(storage.data() + next(40), layout_shape);
    for (int d = 0; d < v.ndim; ++d) {
      const std::int64_t n = v.size(d), b = next(n), step = 1 + next(3);
      v = v.slice(d, b, b + 1 + next(n - b), step);
    }
    if (next(4) == 0)
      v = v.transpose(0, 1);
    return v;
  };
  auto elements = [&](const TensorView& v) {
    std::vector<std::int64_t> at;
    detail::for_each_element(v, v, [&](std::int64_t o, std::int64_t) {
      at.push_back(static_cast<const float*>(v.data) - storage.data() + o);
    });
    return at;
  };
  int exact = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const Shape layout = next(2) ? Shape{6, 8} : Shape{4, 9};
    const TensorView a = random_view(layout),
                     b = next(2) ? random_view(layout) : random_view(Shape{6, 8});
    const auto ea = elements(a), eb = elements(b);
    bool share = false;
    for (auto x : ea)
      for (auto y : eb)
        share = share || x == y;
    const bool said = detail::views_overlap(a, b);
    if (share) {
      ASSERT_TRUE(said) << "a shared element was missed: " << a.describe() << " and "
                        << b.describe();
    }
    if (a.strides == b.strides) {
      ASSERT_EQ(said, share) << a.describe() << " and " << b.describe();
      ++exact;
    }
  }
  EXPECT_GT(exact, 500) << "too few same-stride pairs to test the exact case";
}

} // namespace
} // namespace samebits

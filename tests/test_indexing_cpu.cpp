// index_select and gather on the CPU: against a naive reference for every dim of 1-4-D tensors,
// every dtype and index type, strided inputs and outputs, empty tensors, every level, bitwise
// stability over thread counts, and bad input that must leave out untouched.
#include "testing.hpp"

#include <set>

namespace samebits {
namespace {

using testing::fresh_seed;
using testing::random_values;

// Row-major multi-index of flat position i in `shape`.
std::vector<std::int64_t> unravel(std::int64_t i, const Shape& shape) {
  std::vector<std::int64_t> c(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    c[static_cast<std::size_t>(d)] = i % shape[static_cast<std::size_t>(d)];
    i /= shape[static_cast<std::size_t>(d)];
  }
  return c;
}
std::int64_t ravel(const std::vector<std::int64_t>& c, const Shape& shape) {
  std::int64_t i = 0;
  for (std::size_t d = 0; d < shape.size(); ++d)
    i = i * shape[d] + c[d];
  return i;
}

std::vector<double> ref_index_select(const Tensor& x, int dim, const std::vector<double>& idx,
                                     const Shape& out_shape) {
  const auto xv = testing::to_doubles(x);
  std::vector<double> out;
  Shape xs = x.sizes();
  std::int64_t n = 1;
  for (auto s : out_shape)
    n *= s;
  for (std::int64_t i = 0; i < n; ++i) {
    auto c = unravel(i, out_shape);
    c[static_cast<std::size_t>(dim)] =
        static_cast<std::int64_t>(idx[static_cast<std::size_t>(c[static_cast<std::size_t>(dim)])]);
    out.push_back(xv[static_cast<std::size_t>(ravel(c, xs))]);
  }
  return out;
}

std::vector<double> ref_gather(const Tensor& x, int dim, const Tensor& index) {
  const auto xv = testing::to_doubles(x), iv = testing::to_doubles(index);
  std::vector<double> out;
  for (std::int64_t i = 0; i < index.numel(); ++i) {
    auto c = unravel(i, index.sizes());
    c[static_cast<std::size_t>(dim)] = static_cast<std::int64_t>(iv[static_cast<std::size_t>(i)]);
    out.push_back(xv[static_cast<std::size_t>(ravel(c, x.sizes()))]);
  }
  return out;
}

const std::vector<Shape> kShapes = {{7}, {5, 6}, {3, 4, 5}, {2, 3, 4, 5}, {1, 9, 1, 3}};

TEST(IndexSelect, MatchesReferenceEveryDimDtypeAndIndexType) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const auto& shape : kShapes)
    for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64})
      for (DType it : {DType::i32, DType::i64})
        for (int dim = 0; dim < static_cast<int>(shape.size()); ++dim) {
          Tensor x = random_values(shape, dt, seed + static_cast<std::uint64_t>(dim));
          const std::int64_t n = 11; // more than the dim: repeats are allowed
          Tensor idx = testing::random_index(n, shape[static_cast<std::size_t>(dim)], it, seed + 7);
          Shape os = shape;
          os[static_cast<std::size_t>(dim)] = n;
          for (auto level :
               {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable}) {
            Tensor out = Tensor::full(os, 42.0, dt);
            index_select(x, dim - static_cast<int>(shape.size()) * (dim % 2), idx, out,
                         {.level = level});
            EXPECT_EQ(testing::to_doubles(out),
                      ref_index_select(x, dim, testing::to_doubles(idx), os))
                << x.view().describe() << " dim " << dim;
          }
        }
}

TEST(IndexSelect, StridedInputsAndOutputs) {
  const auto seed = fresh_seed();
  Tensor x = testing::random_normal({6, 5, 4}, DType::f32, seed);
  Tensor keep_x, keep_o, keep_i;
  const TensorView xs = testing::strided_copy(x, keep_x);
  const TensorView xt = x.view().transpose(0, 2); // [4, 5, 6]
  for (int dim = 0; dim < 3; ++dim) {
    Tensor idx = testing::random_index(8, xt.size(dim), DType::i64, seed + 1);
    const TensorView idx_s = testing::strided_copy(idx, keep_i);
    Shape os = xt.sizes();
    os[static_cast<std::size_t>(dim)] = 8;
    Tensor base = Tensor::empty(os, DType::f32);
    const TensorView outs = testing::strided_copy(base, keep_o);
    index_select(xt, dim, idx_s, outs);
    EXPECT_EQ(testing::to_doubles(outs),
              ref_index_select(Tensor::copy_of(xt), dim, testing::to_doubles(idx), os));
    Shape os2 = x.sizes();
    os2[static_cast<std::size_t>(dim)] = 8;
    Tensor idx2 = testing::random_index(8, x.size(dim), DType::i32, seed + 2);
    Tensor out2 = Tensor::empty(os2, DType::f32);
    index_select(xs, dim, idx2, out2);
    EXPECT_EQ(testing::to_doubles(out2), ref_index_select(x, dim, testing::to_doubles(idx2), os2));
  }
}

// Empty index or empty rows: nothing is written around the (empty) output, x is not written,
// and the index is still checked (a bad value in an index that selects empty rows is an error).
TEST(IndexSelect, EmptyIndexAndEmptyTensor) {
  for (auto level : {Determinism::not_guaranteed, Determinism::portable}) {
    SCOPED_TRACE(std::string(to_string(level)));
    Tensor x = testing::random_normal({4, 3}, DType::f32, fresh_seed());
    const Tensor x_before = x.clone();
    // out: [0, 3] inside a poisoned buffer (a view that starts one row in).
    Tensor buf = Tensor::full({2, 3}, -5.0, DType::f32);
    const TensorView out = buf.view().slice(0, 1, 1);
    ASSERT_EQ(out.numel(), 0);
    index_select(x, 0, Tensor::empty({0}, DType::i64), out, {.level = level});
    EXPECT_EQ(testing::to_doubles(buf), std::vector<double>(6, -5.0));
    EXPECT_TRUE(bitwise_equal(x, x_before));
    // dim 1, empty index: out [4, 0], inside a poisoned [4, 2] buffer.
    Tensor buf1 = Tensor::full({4, 2}, -5.0, DType::f32);
    index_select(x, 1, Tensor::empty({0}, DType::i32), buf1.view().slice(1, 1, 1),
                 {.level = level});
    EXPECT_EQ(testing::to_doubles(buf1), std::vector<double>(8, -5.0));
    // Rows of no columns: the index {3, 0} is valid, out [2, 0]; 4 is out of range even so.
    Tensor x0 = Tensor::empty({4, 0}, DType::f32);
    Tensor out0 = Tensor::empty({2, 0}, DType::f32);
    EXPECT_NO_THROW(index_select(x0, 0, Tensor::from_vector<std::int64_t>({3, 0}, {2}), out0,
                                 {.level = level}));
    EXPECT_THROW(
        index_select(x0, 0, Tensor::from_vector<std::int64_t>({3, 4}, {2}), out0, {.level = level}),
        IndexOutOfRange);
    // A shape mismatch is refused though nothing would be written.
    EXPECT_THROW(index_select(x, 0, Tensor::empty({0}, DType::i64),
                              Tensor::empty({0, 2}, DType::f32), {.level = level}),
                 InvalidArgument);
  }
}

TEST(Gather, MatchesReferenceEveryDim) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const auto& shape : kShapes)
    for (DType dt : {DType::f32, DType::i64})
      for (DType it : {DType::i32, DType::i64})
        for (int dim = 0; dim < static_cast<int>(shape.size()); ++dim) {
          Tensor x = random_values(shape, dt, seed);
          Shape is = shape; // index: smaller than x in the other dims, larger along dim
          for (std::size_t d = 0; d < is.size(); ++d)
            is[d] =
                static_cast<int>(d) == dim ? shape[d] + 2 : std::max<std::int64_t>(1, shape[d] - 1);
          std::int64_t n = 1;
          for (auto v : is)
            n *= v;
          Tensor idx = Tensor::copy_of(
              testing::random_index(n, shape[static_cast<std::size_t>(dim)], it, seed + 3)
                  .view()
                  .reshape(is));
          Tensor out = Tensor::full(is, 42.0, dt);
          gather(x, dim, idx, out);
          EXPECT_EQ(testing::to_doubles(out), ref_gather(x, dim, idx))
              << x.view().describe() << " dim " << dim;
        }
}

// Strided, transposed, offset and stride-0 inputs and outputs of gather: the backend-ops harness.

TEST(Indexing, BitwiseOverThreadCounts) {
  const auto seed = fresh_seed();
  Tensor x = testing::random_normal({3000, 40}, DType::f32, seed);
  Tensor idx = testing::random_index(5000, 3000, DType::i64, seed);
  std::set<std::uint64_t> hashes;
  for (int threads : {1, 2, 3, 8}) {
    testing::ThreadCount tc(threads);
    for (int r = 0; r < 20; ++r) {
      Tensor out = Tensor::empty({5000, 40}, DType::f32);
      index_select(x, 0, idx, out);
      hashes.insert(content_hash(out));
    }
  }
  EXPECT_EQ(hashes.size(), 1u);
}

TEST(IndexingErrors, BadInputThrowsAndLeavesOutputUntouched) {
  Tensor x = testing::random_normal({4, 3}, DType::f32, fresh_seed());
  Tensor out = Tensor::full({3, 3}, 42.0, DType::f32);
  auto untouched = [&] {
    for (float v : out.to_vector<float>())
      EXPECT_EQ(v, 42.0f);
  };
  try {
    index_select(x, 0, Tensor::from_vector<std::int64_t>({0, 4, 1}, {3}), out);
    ADD_FAILURE() << "no exception";
  } catch (const IndexOutOfRange& e) {
    EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(index_select(x, 0, Tensor::from_vector<std::int32_t>({0, 1, -1}, {3}), out),
               IndexOutOfRange);
  EXPECT_THROW(index_select(x, 0, Tensor::from_vector<std::int64_t>({0, 1}, {2}), out),
               InvalidArgument);
  EXPECT_THROW(index_select(x, 2, Tensor::from_vector<std::int64_t>({0, 1, 2}, {3}), out),
               InvalidArgument);
  EXPECT_THROW(index_select(x, 0, Tensor::full({3}, 0.0, DType::f32), out), InvalidArgument);
  untouched();
  Tensor gi = Tensor::from_vector<std::int64_t>({0, 1, 2, 0, 1, 3, 0, 0, 0}, {3, 3});
  EXPECT_THROW(gather(x, 1, gi, out), IndexOutOfRange);
  EXPECT_THROW(
      gather(x, 1, Tensor::zeros({5, 3}, DType::i64), Tensor::full({5, 3}, 1.0, DType::f32)),
      InvalidArgument);
  EXPECT_THROW(gather(x, 0, Tensor::zeros({3}, DType::i64), out), InvalidArgument);
  EXPECT_THROW(
      gather(x, 0, Tensor::zeros({3, 3}, DType::i64), Tensor::full({3, 3}, 1.0, DType::f64)),
      InvalidArgument);
  untouched();
}

} // namespace
} // namespace samebits

// index_select and gather on CUDA: the same bits as the CPU for every dim of 1-4-D tensors, every
// dtype and index type, index lengths on both sides of the one-block check and copy, strided and
// empty tensors; out-of-range indices reported, nothing written.
#include "testing.hpp"

namespace samebits {
namespace {

using testing::fresh_seed;
using testing::random_values;
const Device kGpu = Device::cuda();

const std::vector<Shape> kShapes = {{1000}, {300, 130}, {17, 33, 8}, {3, 4, 5, 6}, {2, 64, 1, 4}};

TEST(IndexingGpu, IndexSelectEqualsCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const auto& shape : kShapes)
    for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64})
      for (DType it : {DType::i32, DType::i64})
        for (int dim = 0; dim < static_cast<int>(shape.size()); ++dim)
          for (std::int64_t len : {50, 400}) { // 400: past the one-block check and copy where
                                               // the other dims make it 16384+ values
            Tensor x = random_values(shape, dt, seed + static_cast<std::uint64_t>(dim));
            Tensor idx =
                testing::random_index(len, shape[static_cast<std::size_t>(dim)], it, seed + 5);
            Shape os = shape;
            os[static_cast<std::size_t>(dim)] = len;
            Tensor cpu = Tensor::empty(os, dt);
            index_select(x, dim, idx, cpu);
            for (auto level : {Determinism::not_guaranteed, Determinism::portable}) {
              Tensor gpu = Tensor::full(os, 3.0, dt, kGpu);
              index_select(x.to(kGpu), dim, idx.to(kGpu), gpu, {.level = level});
              EXPECT_TRUE(bitwise_equal(gpu, cpu))
                  << x.view().describe() << " dim " << dim << " index of " << len;
            }
          }
}

TEST(IndexingGpu, GatherEqualsCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const auto& shape : kShapes)
    for (DType dt : {DType::f32, DType::i64})
      for (DType it : {DType::i32, DType::i64})
        for (int dim = 0; dim < static_cast<int>(shape.size()); ++dim) {
          Tensor x = random_values(shape, dt, seed);
          Shape is = shape;
          for (std::size_t d = 0; d < is.size(); ++d)
            is[d] =
                static_cast<int>(d) == dim ? shape[d] + 3 : std::max<std::int64_t>(1, shape[d] - 1);
          std::int64_t n = 1;
          for (auto v : is)
            n *= v;
          Tensor idx = Tensor::copy_of(
              testing::random_index(n, shape[static_cast<std::size_t>(dim)], it, seed + 2)
                  .view()
                  .reshape(is));
          Tensor cpu = Tensor::empty(is, dt);
          gather(x, dim, idx, cpu);
          Tensor gpu = Tensor::full(is, 3.0, dt, kGpu);
          gather(x.to(kGpu), dim, idx.to(kGpu), gpu);
          EXPECT_TRUE(bitwise_equal(gpu, cpu)) << x.view().describe() << " dim " << dim;
        }
}

TEST(IndexingGpu, StridedAndEmpty) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor x = testing::random_normal({40, 30}, DType::f32, seed);
  Tensor xg = x.to(kGpu), keep_c, keep_g;
  const TensorView xs = testing::strided_copy(x, keep_c), xsg = testing::strided_copy(xg, keep_g);
  Tensor idx = testing::random_index(25, 40, DType::i64, seed);
  Tensor cpu = Tensor::empty({25, 30}, DType::f32), gpu = Tensor::empty({25, 30}, DType::f32, kGpu);
  index_select(xs, 0, idx, cpu);
  index_select(xsg, 0, idx.to(kGpu), gpu);
  EXPECT_TRUE(bitwise_equal(gpu, cpu));
  // Transposed x (not contiguous) along dim 1.
  Tensor cpu_t = Tensor::empty({30, 25}, DType::f32),
         gpu_t = Tensor::empty({30, 25}, DType::f32, kGpu);
  index_select(x.view().transpose(0, 1), 1, idx, cpu_t);
  index_select(xg.view().transpose(0, 1), 1, idx.to(kGpu), gpu_t);
  EXPECT_TRUE(bitwise_equal(gpu_t, cpu_t));
  // Empty index and empty rows.
  Tensor e = Tensor::empty({0, 30}, DType::f32, kGpu);
  index_select(xg, 0, Tensor::empty({0}, DType::i64, kGpu), e);
  Tensor x0 = Tensor::empty({40, 0}, DType::f32, kGpu),
         e0 = Tensor::empty({25, 0}, DType::f32, kGpu);
  index_select(x0, 0, idx.to(kGpu), e0);
}

TEST(IndexingGpu, OutOfRangeReportedNothingWritten) {
  SAMEBITS_REQUIRE_CUDA();
  // A long index (past the one-block check and copy): the check kernel finds position 2.
  Tensor xl = testing::random_normal({40, 32}, DType::f32, fresh_seed(), kGpu);
  std::vector<std::int64_t> long_idx(20000, 3);
  long_idx[2] = 40;
  Tensor lidx = Tensor::from_vector(long_idx, {20000}, kGpu);
  Tensor lout = Tensor::full({20000, 32}, 42.0, DType::f32, kGpu);
  try {
    index_select(xl, 0, lidx, lout);
    ADD_FAILURE() << "no exception for the long index";
  } catch (const IndexOutOfRange& e) {
    EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
  }
  for (float v : lout.to_vector<float>())
    ASSERT_EQ(v, 42.0f);
  Tensor x = testing::random_normal({40, 32}, DType::f32, fresh_seed(), kGpu);
  for (std::int64_t bad : {40, -1, 1 << 30}) {
    Tensor idx = Tensor::from_vector<std::int64_t>({0, 3, bad, 5}, {4}, kGpu);
    Tensor out = Tensor::full({4, 32}, 42.0, DType::f32, kGpu);
    try {
      index_select(x, 0, idx, out);
      ADD_FAILURE() << "no exception for " << bad;
    } catch (const IndexOutOfRange& e) {
      EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
    }
    for (float v : out.to_vector<float>())
      EXPECT_EQ(v, 42.0f);
    Tensor gidx =
        Tensor::from_vector<std::int32_t>({0, 1, 2, static_cast<std::int32_t>(bad)}, {2, 2}, kGpu);
    Tensor gout = Tensor::full({2, 2}, 42.0, DType::f32, kGpu);
    EXPECT_THROW(gather(x, 0, gidx, gout), IndexOutOfRange);
    for (float v : gout.to_vector<float>())
      EXPECT_EQ(v, 42.0f);
  }
}

} // namespace
} // namespace samebits

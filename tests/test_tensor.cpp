// Tensor views, owning tensors, copies, hashes and devices.
#include "testing.hpp"

#include <gmock/gmock.h>

namespace samebits {
namespace {

TEST(TensorView, ContiguousStridesAndViews) {
  Tensor t = testing::random_normal({2, 3, 4}, DType::f32, testing::fresh_seed());
  const TensorView& v = t.view();
  EXPECT_EQ(v.numel(), 24);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.stride(0), 12);
  EXPECT_EQ(v.stride(-1), 1);
  TensorView tr = v.transpose(0, 2);
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.size(0), 4);
  TensorView s = v.select(1, 2);
  EXPECT_EQ(s.sizes(), (Shape{2, 4}));
  EXPECT_EQ(static_cast<float*>(s.data)[0], t.data<float>()[8]);
  TensorView sl = v.slice(2, 1, 4, 2);
  EXPECT_EQ(sl.sizes(), (Shape{2, 3, 2}));
  EXPECT_THROW(v.slice(2, 0, 5), IndexOutOfRange);
  EXPECT_THROW(v.select(3, 0), InvalidArgument);
  EXPECT_THROW(tr.reshape({24}), InvalidArgument);
  EXPECT_THROW(v.ptr<double>(), InvalidArgument);
}

TEST(TensorView, TooManyDimsRejected) {
  EXPECT_THROW(Tensor::empty({1, 2, 3, 4, 5}, DType::f32), InvalidArgument);
  EXPECT_THROW(Tensor::empty({-1}, DType::f32), InvalidArgument);
}

// The limit is named in the error, for owning tensors and for views alike; kMaxDims itself works.
TEST(TensorView, TheDimensionLimitIsNamed) {
  static_assert(kMaxDims == 4);
  const auto message_of = [](auto&& make) {
    return testing::caught<InvalidArgument>(make).value_or("no error");
  };
  const std::string limit = "a tensor of 5 dimensions: samebits tensors have at most kMaxDims = 4";
  EXPECT_THAT(message_of([] {
                Tensor::empty({2, 1, 3, 1, 2}, DType::f32);
              }),
              ::testing::HasSubstr(limit));
  float data[12] = {};
  EXPECT_THAT(message_of([&] {
                TensorView::of(data, {1, 2, 1, 3, 2});
              }),
              ::testing::HasSubstr(limit));
  EXPECT_EQ(Tensor::empty({2, 1, 3, 2}, DType::f32).view().ndim, kMaxDims);
}

TEST(Tensor, NegativeOrOverflowingSizesAreRejectedBeforeAllocating) {
  EXPECT_THROW(Tensor::empty({-5}, DType::f32), InvalidArgument);
  EXPECT_THROW(Tensor::empty({3, -1}, DType::f64), InvalidArgument);
  EXPECT_THROW(Tensor::empty({std::int64_t{1} << 62}, DType::f32), InvalidArgument); // 2^64 bytes
  EXPECT_THROW(Tensor::empty({std::int64_t{1} << 40, std::int64_t{1} << 30}, DType::i32),
               InvalidArgument);
  EXPECT_EQ(Tensor::empty({0, std::int64_t{1} << 62}, DType::f32).numel(),
            0); // empty: nothing to allocate
}

TEST(Tensor, CopyOfStridedIsRowMajor) {
  Tensor t = testing::random_normal({3, 5}, DType::f64, testing::fresh_seed());
  Tensor tt = Tensor::copy_of(t.view().transpose(0, 1));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      EXPECT_EQ(tt.data<double>()[j * 3 + i], t.data<double>()[i * 5 + j]);
}

TEST(Tensor, HashIgnoresStridesButNotValuesOrShape) {
  Tensor t = testing::random_normal({4, 6}, DType::f32, testing::fresh_seed());
  Tensor keep;
  TensorView s = testing::strided_copy(t, keep);
  EXPECT_EQ(content_hash(t), content_hash(s));
  EXPECT_TRUE(bitwise_equal(t, s));
  Tensor r = Tensor::copy_of(t.view().reshape({6, 4}));
  EXPECT_NE(content_hash(t), content_hash(r));
  Tensor u = t.clone();
  u.data<float>()[5] = std::nextafter(u.data<float>()[5], 1e9f);
  EXPECT_NE(content_hash(t), content_hash(u));
  EXPECT_FALSE(bitwise_equal(t, u));
}

TEST(Tensor, FillAndFromVector) {
  Tensor t = Tensor::full({3}, 2.5, DType::f64);
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_THROW(Tensor::from_vector(std::vector<int>{1, 2}, {3}), InvalidArgument);
}

TEST(Device, Parse) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3"), Device::cuda(3));
  EXPECT_THROW(parse_device("tpu"), InvalidArgument);
  EXPECT_THROW(parse_device("cuda:x"), InvalidArgument);
}

} // namespace
} // namespace samebits

namespace samebits {
namespace {

TEST(Tensor, DefaultConstructedHoldsNothing) {
  Tensor t;
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_FALSE(t.defined());
  Tensor s = Tensor::full({}, 3.0, DType::f32); // a real 0-d tensor has one element
  EXPECT_EQ(s.numel(), 1);
}

} // namespace
} // namespace samebits

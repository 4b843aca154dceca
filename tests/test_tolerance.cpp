// Calibrated tolerances: spread measurement, JSON round trip, the check and its message, and the
// GoogleTest assertion (including that it fails with a useful message).
#include "samebits/tolerance.hpp"
#include "samebits/tolerance_gtest.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

namespace samebits {
namespace {

TEST(Calibrator, MeasuresSpreadAndAppliesTheSafetyFactor) {
  Calibrator cal(4.0);
  cal.add("w", Tensor::from_vector(std::vector<float>{1.0f, -2.0f, 100.0f}, {3}));
  cal.add("w", Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 100.0f}, {3}));
  cal.add("w", Tensor::from_vector(std::vector<float>{1.25f, -2.0f, 99.0f}, {3}));
  cal.add("same", Tensor::full({2, 2}, 3.0, DType::f64));
  cal.add("same", Tensor::full({2, 2}, 3.0, DType::f64));
  const Tolerances t = cal.tolerances("unit test");
  EXPECT_EQ(t.runs, 3);
  const Tolerance& w = t.at("w");
  EXPECT_DOUBLE_EQ(w.max_abs_diff, 1.0); // 100 vs 99
  EXPECT_DOUBLE_EQ(w.max_rel_diff, 0.5); // 0.5 / |1.0|
  EXPECT_DOUBLE_EQ(w.abs, 4.0);
  EXPECT_DOUBLE_EQ(w.rel, 2.0);
  EXPECT_EQ(w.shape, (Shape{3}));
  EXPECT_EQ(t.at("same").abs, 0.0);
  EXPECT_EQ(t.at("same").rel, 0.0);
  EXPECT_THROW(cal.add("w", Tensor::full({4}, 1.0, DType::f32)), InvalidArgument);
  try {
    (void)t.at("missing");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("same, w"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Calibrator(0.5), InvalidArgument);
}

TEST(Calibrator, NearZeroValuesDoNotBlowUpTheRelativeFigure) {
  Calibrator cal(1.0);
  cal.add("x", Tensor::from_vector(std::vector<double>{1000.0, 1e-12}, {2}));
  cal.add("x", Tensor::from_vector(std::vector<double>{1000.0, 2e-12}, {2}));
  const Tolerance x = cal.tolerances().at("x");    // a copy: tolerances() returns a temporary
  EXPECT_NEAR(x.max_rel_diff, 1e-12 / 1.0, 1e-20); // floor: 1e-3 * 1000
}

TEST(Tolerances, JsonRoundTripAndFileErrors) {
  Calibrator cal(2.0);
  cal.add("a.b", testing::random_normal({4, 5}, DType::f32, testing::fresh_seed()));
  cal.add("a.b", testing::random_normal({4, 5}, DType::f32, testing::fresh_seed()));
  const Tolerances t = cal.tolerances("round trip");
  const auto path = (std::filesystem::temp_directory_path() /
                     ("samebits_tol_" + std::to_string(::getpid()) + ".json"))
                        .string();
  save_tolerances(t, path);
  const Tolerances back = load_tolerances(path);
  EXPECT_EQ(back.safety_factor, 2.0);
  EXPECT_EQ(back.runs, 2);
  EXPECT_EQ(back.source, "round trip");
  EXPECT_EQ(back.at("a.b").abs, t.at("a.b").abs);
  EXPECT_EQ(back.at("a.b").rel, t.at("a.b").rel);
  EXPECT_EQ(back.at("a.b").shape, (Shape{4, 5}));
  EXPECT_FALSE(back.environment_json.empty());
  std::remove(path.c_str());
  EXPECT_THROW(load_tolerances(path), DataError);
  EXPECT_THROW(tolerances_from_json("{\"x\": 1}"), DataError);
  EXPECT_THROW(tolerances_from_json("not json"), DataError);
}

TEST(CheckClose, PassesWithinAndFailsOutsideWithAClearMessage) {
  Tolerance tol;
  tol.abs = 1e-3;
  tol.rel = 1e-2;
  Tensor e = Tensor::from_vector(std::vector<float>{1.0f, 100.0f, NAN, 0.0f, 5.0f, 6.0f}, {2, 3});
  Tensor ok =
      Tensor::from_vector(std::vector<float>{1.005f, 100.9f, NAN, 0.0009f, 5.0f, 6.0f}, {2, 3});
  EXPECT_TRUE(check_close(ok, e, tol).ok);
  Tensor bad =
      Tensor::from_vector(std::vector<float>{1.005f, 102.0f, 1.0f, 0.0009f, 5.0f, 6.5f}, {2, 3});
  const auto r = check_close(bad, e, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failures, 3);
  EXPECT_EQ(r.first_failure, 1);
  EXPECT_EQ(r.worst, 2) << "NaN on one side is the worst failure";
  EXPECT_NE(r.message.find("3 of 6 elements"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("worst at [0, 2]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("first at [0, 1]"), std::string::npos) << r.message;
  // Zero tolerance demands equality; strided views compare by their logical contents.
  Tolerance exact;
  Tensor keep;
  EXPECT_TRUE(check_close(testing::strided_copy(e, keep), e, exact).ok);
  EXPECT_FALSE(check_close(e, Tensor::full({3, 2}, 1.0, DType::f32), exact).ok);
  Tolerance shaped = tol;
  shaped.shape = {6};
  EXPECT_NE(check_close(e, e, shaped).message.find("calibrated for shape [6]"), std::string::npos);
}

// A tolerance calibrated on runs that gave NaN is infinite: it lets everything but NaN on one side
// through, where expected is 0 as elsewhere. Integers compare exactly, beyond 2^53 too.
TEST(CheckClose, InfiniteTolerancesAndLargeIntegers) {
  Tensor e = Tensor::from_vector(std::vector<float>{0.0f, 2.0f, 0.0f}, {3});
  Tensor a = Tensor::from_vector(std::vector<float>{1e30f, -7.0f, NAN}, {3});
  Tolerance infinite_rel;
  infinite_rel.rel = INFINITY;
  const auto r = check_close(a, e, infinite_rel);
  EXPECT_EQ(r.failures, 1) << r.message;
  EXPECT_EQ(r.first_failure, 2) << "only the NaN fails";
  Tolerance infinite_abs;
  infinite_abs.abs = INFINITY;
  EXPECT_EQ(check_close(a, e, infinite_abs).failures, 1);

  const std::int64_t big = std::int64_t{1} << 53;
  Tensor x = Tensor::from_vector(std::vector<std::int64_t>{big + 1, 5, INT64_MIN}, {3});
  Tensor y = Tensor::from_vector(std::vector<std::int64_t>{big, 5, INT64_MAX}, {3});
  const auto exact = check_close(x, y, Tolerance{});
  EXPECT_EQ(exact.failures, 2) << exact.message;
  EXPECT_EQ(exact.first_failure, 0) << "2^53 + 1 is not 2^53";
  Tolerance one;
  one.abs = 1;
  EXPECT_EQ(check_close(x, y, one).failures, 1) << "a difference of 1 is allowed; 2^64 - 1 is not";
  EXPECT_TRUE(check_close(x, x, Tolerance{}).ok);
}

TEST(ExpectClose, GoogleTestAssertion) {
  Calibrator cal;
  Tensor a = testing::random_normal({50}, DType::f32, testing::fresh_seed());
  cal.add("x", a);
  Tensor a2 = a.clone();
  a2.data<float>()[7] += 1e-4f;
  cal.add("x", a2);
  const Tolerances t = cal.tolerances();
  SAMEBITS_EXPECT_CLOSE(a2, a, t.at("x"));
  expect_close(a, a2, t, "x");
  Tensor far = a.clone();
  far.data<float>()[3] += 1.0f;
  EXPECT_NONFATAL_FAILURE(SAMEBITS_EXPECT_CLOSE(far, a, t.at("x")), "worst at [3]");
  EXPECT_NONFATAL_FAILURE(expect_close(far, a, t, "x"), "tensor 'x'");
}

} // namespace
} // namespace samebits

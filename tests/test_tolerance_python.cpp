// Tolerances from Python: the file samebits.torch.calibrate wrote (tests/data/
// tolerances_from_python.json, regenerated and compared by python/tests/test_testing.py) reads
// back with load_tolerances and holds what the C++ Calibrator computes from the same runs; and
// check_close's messages, which samebits.testing.assert_close repeats word for word.
#include "samebits/tolerance.hpp"
#include "testing.hpp"

#include <cmath>
#include <gtest/gtest.h>

namespace samebits {
namespace {

TEST(TolerancesFromPython, TheFileReadsBackAsTheCppCalibratorComputesIt) {
  const Tolerances file = load_tolerances("tests/data/tolerances_from_python.json");
  EXPECT_EQ(file.runs, 4);
  EXPECT_EQ(file.safety_factor, 4.0);
  EXPECT_EQ(file.source, "python/tests/test_testing.py fixture");
  // The runs of python/tests/test_testing.py's fixture_runs().
  Calibrator cal;
  for (int k = 0; k < 4; ++k) {
    std::vector<double> w = {1.0, -2.0, 4.0, 0.0};
    const double step[] = {1e-6, 0.0, -3e-6, 2e-9};
    for (int i = 0; i < 4; ++i)
      w[i] = w[i] + k * step[i];
    cal.add("w", Tensor::from_vector(w, {2, 2}));
    cal.add("b", Tensor::from_vector(std::vector<float>{0.5f, NAN, k == 2 ? NAN : 3.0f}, {3}));
    cal.add("steps", Tensor::from_vector(std::vector<std::int64_t>{7, 8}, {2}));
  }
  const Tolerances cpp = cal.tolerances();
  ASSERT_EQ(file.tensors.size(), cpp.tensors.size());
  for (const auto& [name, c] : cpp.tensors) {
    const Tolerance& p = file.at(name);
    EXPECT_EQ(p.shape, c.shape) << name;
    EXPECT_EQ(p.max_abs_diff, c.max_abs_diff) << name;
    EXPECT_EQ(p.max_rel_diff, c.max_rel_diff) << name;
    EXPECT_EQ(p.abs, c.abs) << name;
    EXPECT_EQ(p.rel, c.rel) << name;
  }
  EXPECT_TRUE(std::isinf(file.at("b").abs));
  EXPECT_EQ(file.at("steps").abs, 0.0);
}

TEST(TolerancesFromPython, MessagesThatPythonRepeats) {
  Tolerance tol;
  tol.abs = 1e-3;
  tol.rel = 1e-2;
  Tensor e = Tensor::from_vector(std::vector<float>{1.0f, 100.0f, NAN, 0.0f, 5.0f, 6.0f}, {2, 3});
  Tensor bad =
      Tensor::from_vector(std::vector<float>{1.005f, 102.0f, 1.0f, 0.0009f, 5.0f, 6.5f}, {2, 3});
  EXPECT_EQ(check_close(bad, e, tol).message,
            "3 of 6 elements differ by more than abs 0.001 + rel 0.01 * |expected|; worst at [0, "
            "2]: actual 1, expected nan, difference nan, allowed nan (infx); first at [0, 1]");
  EXPECT_EQ(check_close(e, bad, tol).message,
            "3 of 6 elements differ by more than abs 0.001 + rel 0.01 * |expected|; worst at [0, "
            "2]: actual nan, expected 1, difference nan, allowed 0.011 (infx); first at [0, 1]");
  Tolerance one;
  one.abs = 1;
  const std::int64_t big = std::int64_t{1} << 60;
  EXPECT_EQ(check_close(Tensor::from_vector(std::vector<std::int64_t>{3, big}, {2}),
                        Tensor::from_vector(std::vector<std::int64_t>{3, big + 5}, {2}), one)
                .message,
            "1 of 2 elements differ by more than abs 1 + rel 0 * |expected|; worst at [1]: actual "
            "1.1529215e+18, expected 1.1529215e+18, difference 0, allowed 1 (5x); first at [1]");
}

} // namespace
} // namespace samebits

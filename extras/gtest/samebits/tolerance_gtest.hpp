// GoogleTest assertions over calibrated tolerances (include from tests only):
//
//   const auto tol = samebits::load_tolerances("tests/data/sage_tolerances.json");
//   SAMEBITS_EXPECT_CLOSE(weights, reference, tol.at("conv1.weight"));
//   samebits::expect_close(weights, reference, tol, "conv1.weight");
//
// On failure the message names the tensor expressions, the number of failing elements, the
// worst element (its index, both values, the difference and what was allowed) and the tolerance.
#pragma once
#include "samebits/tolerance.hpp"

#include <gtest/gtest.h>

namespace samebits {

inline ::testing::AssertionResult assert_close(const char* actual_expr, const char* expected_expr,
                                               const char* tol_expr, const TensorView& actual,
                                               const TensorView& expected, const Tolerance& tol) {
  const CloseResult r = check_close(actual, expected, tol);
  if (r.ok)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual_expr << " is not close to " << expected_expr
                                       << " within " << tol_expr << ": " << r.message;
}

// Checks the tensor `name` of a calibrated set.
inline void expect_close(const TensorView& actual, const TensorView& expected,
                         const Tolerances& tolerances, const std::string& name) {
  const Tolerance& tol = tolerances.at(name);
  EXPECT_PRED_FORMAT3(assert_close, actual, expected, tol) << "(tensor '" << name << "')";
}

} // namespace samebits

#define SAMEBITS_EXPECT_CLOSE(actual, expected, tol)                                               \
  EXPECT_PRED_FORMAT3(::samebits::assert_close, actual, expected, tol)
#define SAMEBITS_ASSERT_CLOSE(actual, expected, tol)                                               \
  ASSERT_PRED_FORMAT3(::samebits::assert_close, actual, expected, tol)

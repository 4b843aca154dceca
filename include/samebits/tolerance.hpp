// Tolerances calibrated from measured run-to-run spread (`samebits calibrate`), and the check
// that uses them.
//
// Calibration: a tensor is observed in N runs; per element, spread = max - min over the runs.
//   max_abs_diff = max over elements of spread
//   max_rel_diff = max over elements of spread / max(|first run's value|, floor), where
//                  floor = rel_floor * (largest |value| of the tensor), so that values that
//                  cancel to near zero do not make the relative figure meaningless
// and the tolerance is safety_factor times each. A deterministic computation calibrates to
// zero: the check then demands the same values (NaN matching NaN).
//
// Check: element i passes when both are NaN, or actual == expected, or
//   |actual - expected| <= abs + rel * |expected|     (the numpy / PyTorch allclose rule).
//
// File format (JSON): {"samebits_tolerances": 1, "safety_factor": 4, "runs": 20, "source": ...,
//   "environment": {...}, "tensors": {"name": {"shape": [...], "max_abs_diff": ..,
//   "max_rel_diff": .., "abs": .., "rel": ..}}}
#pragma once
#include "samebits/tensor.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace samebits {

struct Tolerance {
  double abs = 0, rel = 0; // what the check allows
  // What was measured (before the safety factor); informational.
  double max_abs_diff = 0, max_rel_diff = 0;
  Shape shape;
};

struct Tolerances {
  double safety_factor = 4.0;
  int runs = 0;
  std::string source;           // what was measured (op and shape, or experiment)
  std::string environment_json; // where it was measured
  std::map<std::string, Tolerance> tensors;

  // The tolerance of a tensor; throws InvalidArgument naming the tensors it has.
  const Tolerance& at(const std::string& name) const;
};

// Collects observations of named tensors over runs and turns their spread into tolerances.
class Calibrator {
public:
  explicit Calibrator(double safety_factor = 4.0, double rel_floor = 1e-3);
  // One run's value of tensor `name` (same shape every time; InvalidArgument otherwise).
  void add(const std::string& name, const TensorView& value);
  // Tolerances from the runs seen so far (runs = the most observations of any tensor).
  Tolerances tolerances(const std::string& source = "") const;

private:
  struct Spread {
    Shape shape;
    std::vector<double> first, lo, hi;
    int runs = 0;
  };
  double safety_, rel_floor_;
  std::map<std::string, Spread> spreads_;
};

std::string to_json(const Tolerances& t);
Tolerances tolerances_from_json(const std::string& json); // throws DataError
void save_tolerances(const Tolerances& t, const std::string& path);
Tolerances load_tolerances(const std::string& path); // throws DataError naming the file

struct CloseResult {
  bool ok = true;
  std::int64_t elements = 0, failures = 0;
  std::int64_t first_failure = -1; // row-major element index
  std::int64_t worst = -1;         // element with the largest |a - e| / allowed
  double worst_actual = 0, worst_expected = 0, worst_allowed = 0;
  std::string message; // empty when ok
};
// Compares two tensors (any devices and strides; same shape; float or integer dtypes).
CloseResult check_close(const TensorView& actual, const TensorView& expected, const Tolerance& tol);

} // namespace samebits

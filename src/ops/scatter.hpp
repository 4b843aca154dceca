// Arguments of the scatter-family ops as their variants receive them (already validated except
// for index values, which every variant checks before it writes anything).
#pragma once
#include "samebits/ops/scatter.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits::detail {

// One shape for every scatter op: src and index have the same shape I (ndim 1..4), out has I's
// shape with size `dim` replaced by the number of targets M. The element of index at position p
// sends src[p] to out[p with p[dim] = index[p]]. index_add passes its index vector as a view of
// src's shape with stride 0 on every dim but 0; scatter ops pass src and out sliced to I.
struct ScatterArgs {
  TensorView out;
  TensorView index; // int32 or int64; unused (empty) when `plan` is set
  TensorView src;
  int dim = 0;
  Reduce reduce = Reduce::sum;
  bool include_self = true;
  double alpha = 1.0;              // index_add only: contributions are alpha * src
  const IndexPlan* plan = nullptr; // index_add with a plan (dim 0, index a vector)
  const char* op = "scatter";      // for error messages
};

// make_index_plan: fills *result.
struct PlanArgs {
  TensorView index; // int32 or int64, 1-D
  std::int64_t num_targets = 0;
  IndexPlan* result = nullptr;
};

// Index values of a scatter must lie in [0, M): the message every backend throws.
std::string index_error_message(const char* op, std::int64_t position, std::int64_t value,
                                std::int64_t num_targets);

} // namespace samebits::detail

// The CPU index plan builder (stable counting sort, parallel and deterministic), shared by
// make_index_plan and the CPU scatter variants that sort on every call.
#pragma once
#include "samebits/ops/scatter.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits::detail {

// Fills order[n] and offsets[num_targets + 1] (int64) from the 1-D index view `index` (int32 or
// int64, any stride, on the CPU). Throws IndexOutOfRange naming `op` and the first bad position
// before writing anything outside the two arrays.
void build_index_plan_cpu(const TensorView& index, std::int64_t num_targets, std::int64_t* order,
                          std::int64_t* offsets, const char* op);

class Registry;
void register_cpu_index_plan(Registry& r);

IndexPlan make_index_plan_cpu(const TensorView& index, std::int64_t num_targets, const char* op);

} // namespace samebits::detail

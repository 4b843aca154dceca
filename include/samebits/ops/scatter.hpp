// Scatter-type ops (PyTorch semantics) and the reusable index plan.
#pragma once
#include <cstdint>

#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

enum class Reduce : std::uint8_t { sum, mean, amax, amin, prod };
std::string_view to_string(Reduce r);
Reduce parse_reduce(std::string_view s);  // "sum", "mean", "amax"/"max", "amin"/"min", "prod"

// A plan built once from an index vector of n entries with values in [0, num_targets):
// `order` is the stable sort permutation (int64[n]: sources grouped by target, ascending source
// order within a target) and `offsets` the CSR offsets (int64[num_targets + 1]). Plans live on
// the device of the index they were built from and are immutable.
struct IndexPlan {
  Tensor order;    // int64[n]
  Tensor offsets;  // int64[num_targets + 1]
  std::int64_t num_sources = 0;
  std::int64_t num_targets = 0;
  Device device = Device::cpu();
};

// Builds a plan; throws IndexOutOfRange (naming the first bad position) if an index is outside
// [0, num_targets).
IndexPlan make_index_plan(const TensorView& index, std::int64_t num_targets,
                          const Options& opts = {});

// out[index[i], ...] += alpha * src[i, ...] along dim 0. index: int32/int64 [n]; src: [n, ...];
// out: [m, ...].
void index_add(const TensorView& out, const TensorView& index, const TensorView& src,
               double alpha = 1.0, const Options& opts = {});
// Same, with a plan built from `index` (reused across calls; no sort).
void index_add(const TensorView& out, const IndexPlan& plan, const TensorView& src,
               double alpha = 1.0, const Options& opts = {});

// PyTorch scatter_add_: for every position p of index, out[p with p[dim] = index[p]] += src[p].
void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src,
                 const Options& opts = {});
// PyTorch scatter_reduce_(dim, index, src, reduce, include_self).
void scatter_reduce(const TensorView& out, int dim, const TensorView& index,
                    const TensorView& src, Reduce reduce, bool include_self = true,
                    const Options& opts = {});

}  // namespace samebits

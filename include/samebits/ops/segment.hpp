// Segmented reductions over CSR offsets, and the fused graph aggregation.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/ops/scatter.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

// out[s, ...] = reduce(src[offsets[s] .. offsets[s+1]), ...]) for s in [0, num_segments).
// offsets: int64 [num_segments + 1], non-decreasing, offsets[0] = 0, last = src.size(0).
// reduce: sum, mean, amax, amin. Empty segments give 0.
void segment_reduce(const TensorView& src, const TensorView& offsets, const TensorView& out,
                    Reduce reduce, const Options& opts = {});

// A graph in CSR form: the in-neighbours of node i are indices[offsets[i] .. offsets[i+1]).
struct CsrGraph {
  TensorView offsets;  // int64 [num_nodes + 1]
  TensorView indices;  // int32 or int64 [num_edges], values in [0, num_source_nodes)
};

// out[i, :] = reduce over in-neighbours j of x[j, :] (sum, mean or amax); nodes with no
// neighbours get 0. No edge-sized intermediate is materialized.
void aggregate(const CsrGraph& graph, const TensorView& x, const TensorView& out, Reduce reduce,
               const Options& opts = {});

}  // namespace samebits

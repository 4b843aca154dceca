// Segmented reductions over CSR offsets, the fused graph aggregation, and CSR graph builders.
//
// Canonical order (every deterministic variant, on every backend, so `portable` results are the
// same bits on the CPU and on any GPU): each output element out[s, f] is one sequential chain
// over the positions k = offsets[s], offsets[s] + 1, ..., offsets[s+1] - 1 of its segment, in
// ascending order:
//   sum:  acc = +0.0; acc = acc + v_k            (one rounding per add; no fused multiply-add)
//   mean: the sum above, then one division acc / count (count converted to the value type)
//   amax: acc = v_k if (v_k > acc or v_k is NaN), else acc
//   amin: acc = v_k if (v_k < acc or v_k is NaN), else acc
// where v_k = src[k, f] (segment_reduce) or x[indices[k], f] (aggregate). A NaN anywhere in a
// segment makes amax/amin NaN (the last NaN of the chain, payload included); between +0.0 and
// -0.0 the first one met is kept. A sum or mean that is NaN is written as the quiet NaN
// 0x7FC00000 (float32) / 0x7FF8000000000000 (float64), whatever NaN the hardware produced. Empty
// segments (and nodes without in-neighbours) give +0.0 for every reduction. Rows are computed in
// parallel; the order within a row never depends on the thread count, block size or device. The
// not_guaranteed variants add edges (or partial sums) into the output with atomic operations in
// whatever order threads finish.
//
// bfloat16 and float16 (segment_reduce and aggregate, every level, CPU and CUDA): x (src) is
// widened exactly to float32, the float32 variant computes the chain above, and each result is
// rounded once to the dtype (amax/amin: exact).
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/ops/scatter.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits {

// out[s, ...] = reduce(src[offsets[s] .. offsets[s+1]), ...]) for s in [0, num_segments).
// src: float32/float64 [E, ...] (up to 4-D, any strides); offsets: int64 [num_segments + 1],
// non-decreasing, offsets[0] = 0, last = E; out: [num_segments, ...] with src's dtype.
// reduce: sum, mean, amax, amin. Bad offsets throw IndexOutOfRange and leave out untouched.
void segment_reduce(const TensorView& src, const TensorView& offsets, const TensorView& out,
                    Reduce reduce, const Options& opts = {});

// A graph in CSR form: the in-neighbours of node i are indices[offsets[i] .. offsets[i+1]).
struct CsrGraph {
  TensorView offsets; // int64 [num_nodes + 1]
  TensorView indices; // int32 or int64 [num_edges], values in [0, num_source_nodes)
  // >= 0: offsets and indices were validated when the graph was built (every index lies in
  // [0, checked_sources)), so aggregate only checks x.size(0) >= checked_sources and does not
  // read the indices again (on CUDA this saves a check kernel and a host synchronization, and
  // lets calls be captured into CUDA graphs). -1: aggregate validates them on every call.
  std::int64_t checked_sources = -1;
};

// out[i, :] = reduce over in-neighbours j of x[j, :] (sum, mean or amax) in the canonical order
// above; nodes with no neighbours get 0. No edge-sized intermediate is materialized.
// x: float [num_source_nodes, ...]; out: [num_nodes, ...] with x's trailing shape and dtype.
// An index outside [0, x.size(0)) throws IndexOutOfRange and leaves out untouched.
void aggregate(const CsrGraph& graph, const TensorView& x, const TensorView& out, Reduce reduce,
               const Options& opts = {});

// An owning CSR graph, on the device of the tensors it was built from.
struct Csr {
  Tensor offsets;                // int64 [num_nodes + 1]
  Tensor indices;                // [num_edges], the dtype of the edge list it was built from
  std::int64_t num_sources = -1; // every index is < num_sources (-1: not validated)

  std::int64_t num_nodes() const { return offsets.numel() > 0 ? offsets.numel() - 1 : 0; }
  std::int64_t num_edges() const { return indices.numel(); }
  CsrGraph view() const { return {offsets.view(), indices.view(), num_sources}; }
  // The same graph on another device (still validated).
  Csr to(Device d) const { return {offsets.to(d), indices.to(d), num_sources}; }
};

// Builds the in-neighbour CSR of a graph given as an edge list (edge e goes src[e] -> dst[e]):
// node i's row lists the sources of its incoming edges in ascending order (duplicates kept).
// src, dst: int32 or int64 [E] on one device, values in [0, num_nodes); throws IndexOutOfRange
// naming the first bad edge otherwise. The result's indices have src's dtype.
Csr csr_from_edges(const TensorView& src, const TensorView& dst, std::int64_t num_nodes);

// The transpose (out-neighbour CSR): row j lists, in ascending order, every node i whose row in
// `csr` contains j (once per occurrence). num_source_nodes is the number of rows of the result;
// aggregating over the transpose is the backward of aggregating over `csr` (sum).
Csr transpose(const Csr& csr, std::int64_t num_source_nodes);

} // namespace samebits

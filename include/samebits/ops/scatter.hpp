// Scatter-type ops (PyTorch semantics) and the reusable index plan.
//
// Canonical order (the `portable` variants on every backend, CPU and CUDA alike). For every
// target element, its contributions are combined one at a time, sequentially, in ascending source
// position along the scattered dimension (for index_add: ascending row of `src`):
//
//   acc = include_self ? out[t] : c_0          (c_j: the j-th contribution in that order)
//   acc = op(acc, c_j)  for the remaining j     (sum: acc + c, prod: acc * c,
//                                                amax: (c > acc || c is NaN) ? c : acc,
//                                                amin: (c < acc || c is NaN) ? c : acc)
//   mean: acc / (count + (include_self ? 1 : 0)), one correctly rounded division at the end
//
// Each step rounds to the tensor's dtype (no fused multiply-add, no wider accumulator). A target
// element that receives no contribution is left untouched (its bits are not rewritten). For
// index_add, a contribution is src[i] when alpha == 1 and alpha * src[i] (rounded, alpha converted
// to the dtype) otherwise; index_add always includes `out`. NaN propagates: for amax/amin the
// result is the last NaN met in that order, its bits copied; a target that receives a
// contribution and whose sum, mean or prod is NaN is written as the one quiet NaN 0x7FC00000
// (float32) / 0x7FF8000000000000 (float64), whatever NaN the hardware made (x86 keeps an
// operand's payload, NVIDIA GPUs make 0x7FFFFFFF): the rule of segment_reduce and aggregate. So
// every result, NaN included, is bitwise equal across backends (the not_guaranteed variants and
// the fixed-point sum below excepted).
//
// Fixed-point sums (`run_to_run` on CUDA: cuda.fixed_point, for index_add and scatter_add of
// float32 into at most 2^21 output elements, when the index gives one value per row along dim 0
// (index_add, or scatter_add with an index expanded over the features) and rows have at most 4
// features, or when the index tensor has a value per element; decided from shapes, never from
// strides. Other calls at run_to_run take the canonical order). No sort: with n
// contributions c (alpha * src as above) and M = max |c| over the finite ones, 2^(e-1) <= M < 2^e,
// each c is scaled by 2^s, s = 62 - e - ceil(log2 n), rounded to the nearest int64 (ties to even)
// and added with integer atomics: exact, so the order does not matter. A target whose integer sum
// Q is not zero becomes float(double(out) + double(Q) * 2^-s); one whose sum is exactly zero keeps
// its bits. The resolution is 2^-s: contributions are exact to about 2^(e + ceil(log2 n) - 63),
// far below float32 rounding for values of one scale, but a contribution more than about
// 2^(39 - ceil(log2 n)) times smaller than M loses bits, and one of at most 2^-(s+1) rounds to
// zero (one 1e30 among values of 1 erases them); ask for `portable` where values span such ranges.
// Non-finite contributions: a target receiving a NaN, or both +inf and -inf, becomes out + NaN;
// one receiving only +inf (-inf) becomes out + inf (out - inf); its finite contributions do not
// matter. The bits are the same on every run, launch shape and GPU, but differ from the
// canonical order's (and from the plan's, below).
//
// bfloat16 and float16 (every level, CPU and CUDA; out and src of one dtype): the chain above runs
// in float32 and is rounded once: acc = float(out[t]) (or the first contribution), acc = op(acc,
// c_j) in float32 with c_j = float(src) (index_add with alpha != 1: float(alpha) * float(src),
// rounded to float32), mean's division in float32, then out[t] = acc rounded to the dtype (nearest
// even, samebits/half.hpp). amax/amin are exact. A target with no contribution keeps its value
// (a signalling NaN there comes back quiet). The CPU runs its float32 variants on exact float32
// copies; CUDA index_add has its own variants that read the half tensors directly:
// cuda.half_atomic (not_guaranteed: what PyTorch does, a 16-bit atomicAdd per element, each add
// rounded to the dtype, alpha * src rounded to the dtype first) and cuda.half_sort_pull /
// cuda.half_plan_pull (portable, serving run_to_run: the float32 chain above); CUDA scatter_add
// and scatter_reduce run the float32 variants on copies. The fixed-point run_to_run sum is
// float32-only: half calls at run_to_run take the portable chain.
//
// Bad input: an index outside [0, size of the target dim) throws IndexOutOfRange naming the op and
// the first bad position and value; shape, dtype or device mismatches throw InvalidArgument. In
// every such case nothing has been written.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace samebits {

enum class Reduce : std::uint8_t { sum, mean, amax, amin, prod };
std::string_view to_string(Reduce r);
Reduce parse_reduce(std::string_view s); // "sum", "mean", "amax"/"max", "amin"/"min", "prod"

// A plan built once from an index vector of n entries with values in [0, num_targets):
// `order` is the stable sort permutation (int64[n]: sources grouped by target, ascending source
// order within a target) and `offsets` the CSR offsets (int64[num_targets + 1]): the sources of
// target t are order[offsets[t] .. offsets[t+1]). A plan is a pure function of the index (the
// same integers on every backend and thread count). Plans live on the device of the index they
// were built from and are immutable. Their memory belongs to the stream the plan was built on
// (Options::stream): a plan used on another stream must outlive that work (see Tensor::empty).
struct IndexPlan {
  Tensor order;   // int64[n]
  Tensor offsets; // int64[num_targets + 1]
  std::int64_t num_sources = 0;
  std::int64_t num_targets = 0;
  Device device = Device::cpu();
};

// Builds a plan; throws IndexOutOfRange (naming the first bad position) if an index is outside
// [0, num_targets). index: int32/int64, 1-D, any stride.
IndexPlan make_index_plan(const TensorView& index, std::int64_t num_targets,
                          const Options& opts = {});

// Automatic plan reuse (CUDA). The sort that the portable and run_to_run scatters run on every
// call is what a plan saves; a training loop over a fixed graph passes the same index again and
// again without building one. So index_add, scatter_add and scatter_reduce on CUDA remember index
// vectors (index_add's index, or an index that is one vector expanded over the other dims) of at
// least kPlanCacheMinSources entries: the first call sorts as before and keeps a copy of the
// index; a later call whose index is at the same address, of the same length, stride and dtype,
// with the same number of targets, compares the contents with that copy on the device (one read
// of both, one wait for the stream). Equal contents reuse the plan (built on the first equal call,
// then kept): no sort, and the same bits, since a plan is the one stable sort of its index.
// Different contents sort as before; after two such misses in a row the address is left alone (an
// index refilled on every call costs nothing more). The copies and plans take at most the limit
// below (default 1 GiB, or SAMEBITS_PLAN_CACHE_BYTES), least recently used first out, and are
// all given back when a device allocation would otherwise fail. last_explain() says when a call
// reused a plan.
//
// Shorter indices (up to 16384 entries, those one block sorts) are remembered too, per length,
// number of targets and stream, whatever their address, without any wait: the sort itself first
// compares the index with the copies of the last 4 distinct valid indices of that shape it sorted
// on the device and, at an equal one, takes that sort's result (no sort; a stale result cannot be
// served, since the device decides on the contents of the moment). So a model that builds its
// edge index anew every step (PyG's layers adding self-loops) still sorts it once. At most 8 such
// shapes are kept, least recently used first out, and they never push a longer index's plan out.
// They count in stored, entries and bytes but not in hits and misses, which the host never learns.
constexpr std::int64_t kPlanCacheMinSources = 65536;
struct PlanCacheStats {
  std::int64_t hits = 0;   // calls that reused a plan
  std::int64_t misses = 0; // calls whose index differed from the copy kept at its address
  std::int64_t stored = 0; // index copies kept
  std::size_t entries = 0, bytes = 0, limit_bytes = 0;
};
// 0 turns automatic reuse off and frees what it kept (once the device is done with it).
void set_plan_cache_limit(std::size_t bytes);
PlanCacheStats plan_cache_stats();

// out[index[i], ...] += alpha * src[i, ...] along dim 0. index: int32/int64 [n]; src: [n, ...];
// out: [m, ...] (same trailing sizes as src).
void index_add(const TensorView& out, const TensorView& index, const TensorView& src,
               double alpha = 1.0, const Options& opts = {});
// Same, with a plan built from `index` (reused across calls; no sort). The plan variants are
// portable: the same bits as the call with the index at `portable`, and at `run_to_run` wherever
// that call does not take the fixed-point sum above.
void index_add(const TensorView& out, const IndexPlan& plan, const TensorView& src,
               double alpha = 1.0, const Options& opts = {});

// PyTorch scatter_add_: for every position p of index, out[p with p[dim] = index[p]] += src[p].
// index, src and out have the same number of dims (1 to 4); index.size(d) <= src.size(d) for
// every d and index.size(d) <= out.size(d) for d != dim. Equal to scatter_reduce(sum, true).
void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src,
                 const Options& opts = {});
// PyTorch scatter_reduce_(dim, index, src, reduce, include_self), shapes as scatter_add.
// include_self = false: targets that receive contributions start from their first contribution
// (their old value is ignored); others keep their value.
void scatter_reduce(const TensorView& out, int dim, const TensorView& index, const TensorView& src,
                    Reduce reduce, bool include_self = true, const Options& opts = {});

} // namespace samebits

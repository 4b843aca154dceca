// What the CUDA scatter variants share (cuda/scatter.cu: sort and pull, and the registration;
// cuda/scatter_pull.cuh: the pull kernels; cuda/scatter_atomic.cu: atomics;
// cuda/scatter_fixed_point.cu: exact fixed-point sums): the reduce codes kernels take, the
// geometry of any scatter as positions over the index shape, rows of contiguous features, and the
// bad-index error. Launch choice: ops/scatter_choice.hpp; step rules: ops/combine.hpp.
#pragma once
#include "core/registry.hpp"
#include "cuda/deferred_checks.cuh"
#include "cuda/index_plan.cuh"
#include "ops/combine.hpp"
#include "ops/launch_shape.hpp"
#include "ops/scatter.hpp"
#include "ops/scatter_choice.hpp"

#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>
#include <string>

namespace samebits::detail {

__device__ __forceinline__ std::int64_t load_index(const void* p, bool is64, std::int64_t i) {
  return is64 ? static_cast<const std::int64_t*>(p)[i] : static_cast<const std::int32_t*>(p)[i];
}

// --- reductions as kernel template arguments (ints) ---------------------------------------------

enum : int { kSum = 0, kMean = 1, kAmax = 2, kAmin = 3, kProd = 4 };
static_assert(static_cast<int>(Reduce::sum) == kSum && static_cast<int>(Reduce::mean) == kMean &&
              static_cast<int>(Reduce::amax) == kAmax && static_cast<int>(Reduce::amin) == kAmin &&
              static_cast<int>(Reduce::prod) == kProd);

// --- combination steps: ops/combine.hpp, the CPU's own (R, r: a Reduce as int) -------------

template <class T> __device__ __forceinline__ T step(int r, T acc, T c) {
  return detail::step(static_cast<Reduce>(r), acc, c);
}
template <class T> __device__ __forceinline__ T identity(int r) {
  return identity_of<T>(static_cast<Reduce>(r));
}

// --- shapes -----------------------------------------------------------------------------------

// Any scatter as positions e (row-major over the index shape I) with per-tensor strides.
struct Geo4 {
  int nd = 1, d = 0;
  std::int64_t size[4] = {1, 1, 1, 1};     // I
  std::int64_t out_size[4] = {1, 1, 1, 1}; // I with size[d] = M
  std::int64_t src_st[4] = {}, idx_st[4] = {}, out_st[4] = {};
  std::int64_t M = 0, L = 0, inner = 1, numel = 0, out_numel = 0;
};

inline Geo4 geo4(const ScatterArgs& a) {
  Geo4 g;
  g.nd = a.src.ndim;
  g.d = a.dim;
  g.numel = a.src.numel();
  g.M = a.out.size(a.dim);
  g.L = a.src.size(a.dim);
  for (int j = 0; j < g.nd; ++j) {
    g.size[j] = a.src.size(j);
    g.out_size[j] = a.out.size(j);
    g.src_st[j] = a.src.stride(j);
    g.out_st[j] = a.out.stride(j);
    g.idx_st[j] = a.plan ? 0 : a.index.stride(j);
    if (j > a.dim)
      g.inner *= g.size[j];
  }
  g.out_numel = a.out.numel();
  return g;
}

// Offset (in elements, with strides st) of row-major position e over `size`.
__device__ __forceinline__ std::int64_t offset_of(std::int64_t e, const std::int64_t* size,
                                                  const std::int64_t* st, int nd,
                                                  std::int64_t* coords = nullptr) {
  std::int64_t off = 0;
  for (int j = nd - 1; j >= 0; --j) {
    const std::int64_t c = e % size[j];
    e /= size[j];
    off += c * st[j];
    if (coords != nullptr)
      coords[j] = c;
  }
  return off;
}

// Rows: an index vector along dim 0 and src/out rows of F contiguous features (unit stride).
struct Rows {
  bool ok = false;
  std::int64_t L = 0, M = 0, F = 1, src_row = 0, out_row = 0;
};

inline bool unit_rows(const TensorView& v, std::int64_t& f) {
  std::int64_t st = 1;
  for (int j = v.ndim - 1; j >= 1; --j) {
    if (v.size(j) != 1 && v.stride(j) != st)
      return false;
    st *= v.size(j);
  }
  f = st;
  return true;
}

inline Rows rows_of(const ScatterArgs& a) {
  Rows r;
  if (a.dim != 0)
    return r;
  if (a.plan == nullptr)
    for (int j = 1; j < a.index.ndim; ++j)
      if (a.index.size(j) != 1 && a.index.stride(j) != 0)
        return r;
  std::int64_t fs = 0, fo = 0;
  if (!unit_rows(a.src, fs) || !unit_rows(a.out, fo))
    return r;
  r.ok = true;
  r.L = a.src.size(0);
  r.M = a.out.size(0);
  r.F = fs;
  r.src_row = a.src.stride(0);
  r.out_row = a.out.stride(0);
  return r;
}

// The index vector of a rows scatter, as a 1-D view.
inline TensorView index_vector(const ScatterArgs& a) {
  TensorView v = a.index;
  v.ndim = 1;
  v.shape = {a.index.size(0)};
  v.strides = {a.index.stride(0)};
  return v;
}

// --- validation -------------------------------------------------------------------------------

// Geometry of the index alone when it is a vector: 1-D, L positions.
inline Geo4 vector_geo(const ScatterArgs& /*a*/, const Geo4& g) {
  Geo4 v;
  v.nd = 1;
  v.size[0] = g.size[g.d];
  v.idx_st[0] = g.idx_st[g.d];
  v.numel = v.size[0];
  v.M = g.M;
  return v;
}

inline std::int64_t host_offset(std::int64_t e, const Geo4& g) {
  std::int64_t off = 0;
  for (int j = g.nd - 1; j >= 0; --j) {
    off += (e % g.size[j]) * g.idx_st[j];
    e /= g.size[j];
  }
  return off;
}

// The error for the bad index at `pos`, a position over `geo` (vector_geo for rows scatters).
[[noreturn]] inline void throw_bad_index(const ScatterArgs& a, std::int64_t pos, const Geo4& geo) {
  throw IndexOutOfRange(
      index_error_message(a.op, pos, read_index_value(a.index, host_offset(pos, geo)), geo.M));
}

// The message of a deferred scatter check (the index value is known when the check read it).
inline DeferredMessage deferred_scatter_message(const char* op, std::int64_t num_targets,
                                                bool value_known) {
  return [op, num_targets, value_known](int, std::int64_t position, std::int64_t value) {
    if (value_known)
      return index_error_message(op, position, value, num_targets);
    return std::string(op) + ": the index at position " + std::to_string(position) +
           " is out of range [0, " + std::to_string(num_targets) + "); nothing was written";
  };
}

// Whether a rows scatter's check of `vec` is deferred (deferred mode, and an index that plan reuse
// will not remember).
bool may_defer_rows_check(const TensorView& vec, std::int64_t num_keys);

// After the pull of a rows scatter that sorted `vec` with the check record `bad`: waits for the
// check and throws (CudaIndexChecks::wait, or an index that plan reuse may remember, which must be
// known valid first), or queues a deferred report; then remembers the index for plan reuse.
void finish_rows_check(const ScatterArgs& a, const TensorView& vec, std::int64_t num_keys,
                       const Geo4& g, const unsigned long long* bad, cudaStream_t stream);
// The same with the choice made by the caller: `defer` (may_defer_rows_check, read once), and
// `reported` when the pull reported a bad index itself (no report kernel then).
void finish_rows_check(const ScatterArgs& a, const TensorView& vec, std::int64_t num_keys,
                       const Geo4& g, const unsigned long long* bad, cudaStream_t stream,
                       bool defer, bool reported);

// Why a float32/float64 scatter variant refuses bfloat16/float16 arguments (empty: it does not);
// cuda/scatter_half.cu has their variants.
std::string refuse_half(const ScatterArgs& a);

// The cuda.fixed_point variant of index_add or scatter_add (cuda/scatter_fixed_point.cu).
Variant<ScatterArgs> fixed_point_variant(const char* op);

// The cuda.atomic variant's run (cuda/scatter_atomic.cu).
void run_atomic_scatter(const ScatterArgs& a, const Workspace& ws);

} // namespace samebits::detail

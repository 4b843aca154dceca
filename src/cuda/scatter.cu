// CUDA variants of index_add, index_add with a plan, scatter_add and scatter_reduce: their
// registration, and the host side of the sort and plan pulls with the general (column, target)
// path. The pull kernels: cuda/scatter_pull.cuh; the launch choice: ops/scatter_choice.hpp; the
// atomic variant: cuda/scatter_atomic.cu; the fixed point: cuda/scatter_fixed_point.cu.
//
//   cuda.atomic     not_guaranteed  indices checked, then every contribution is combined into
//                                   its target with atomicAdd (atomicCAS loops for prod, amax,
//                                   amin) in whatever order the hardware schedules
//   cuda.fixed_point run_to_run  index_add and scatter_add of float32 into at most 2^21 outputs,
//                                   rows of at most 4 features or an index with a value per
//                                   element: exact int64 fixed-point sums with integer atomics,
//                                   the same integers in any order; no sort (when it applies:
//                                   include/samebits/ops/scatter.hpp; cuda/scatter_fixed_point.cu)
//   cuda.sort_pull  portable        fresh indices every call: (index, position) pairs put in
//                                   stable order with CSR offsets (cuda/index_plan.cu: one
//                                   block's sort for short indices, a counting sort for few
//                                   targets, CUB's radix sort otherwise), then each
//                                   target pulls its sources in ascending order; an index passed
//                                   again whose contents compare equal reuses the plan kept for it
//                                   (cuda/plan_cache.cu)
//   cuda.plan_pull  portable        the same pull over a plan built once (index_add with a plan)
//
// The pull is the canonical order of include/samebits/ops/scatter.hpp (sequential per target,
// ascending source position) whatever the launch shape: for rows of several features a group of
// lanes per target, lanes across features with 16-byte loads where aligned; for rows of one
// value a warp per 32 targets (or per target, for long chains) staging their sources through
// shared memory, or a thread per target over values the sort carried. For float rows of one
// value the sort carries the values themselves instead of positions, so the pull reads them
// contiguously. Scatters whose index differs across columns sort keys (column, target) and pull
// one thread per output element. The CPU computes the same order; tests hold the two to bitwise
// equality.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "cuda/index_plan.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "cuda/scatter_pull.cuh"
#include "cuda/scatter_shared.cuh"
#include "ops/scatter.hpp"
#include "ops/scatter_choice.hpp"

#include <climits>
#include <limits>
#include <optional>
#include <type_traits>

namespace samebits::detail {

namespace {

// General scatters: keys (column, target), one thread per output element.
__global__ void general_keys_kernel(Geo4 g, const void* idx, bool is64, int* keys, int* vals,
                                    unsigned long long* bad) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       e < g.numel; e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t m = load_index(idx, is64, offset_of(e, g.size, g.idx_st, g.nd));
    const bool ok = m >= 0 && m < g.M;
    if (!ok)
      atomicMin(bad, static_cast<unsigned long long>(e));
    const std::int64_t col = (e / (g.L * g.inner)) * g.inner + e % g.inner;
    keys[e] = static_cast<int>(col * g.M + (ok ? m : 0));
    vals[e] = static_cast<int>(e);
  }
}

template <class T>
__global__ void general_pull_kernel(Geo4 g, const T* src, T* out, const int* order,
                                    const int* offsets, int r, bool self, T alpha, bool scaled) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= g.out_numel)
    return;
  const std::int64_t b = offsets[k], e = offsets[k + 1];
  if (b == e)
    return;
  // key k = column * M + target; the output element (o, target, kk) in row-major order.
  const std::int64_t col = k / g.M, m = k - col * g.M;
  const std::int64_t lin = ((col / g.inner) * g.M + m) * g.inner + col % g.inner;
  T& target = out[offset_of(lin, g.out_size, g.out_st, g.nd)];
  std::int64_t s = b;
  auto value = [&](std::int64_t k) {
    return contribution(src[offset_of(order[k], g.size, g.src_st, g.nd)], alpha, scaled);
  };
  T acc = self ? target : value(s++);
  for (; s < e; ++s)
    acc = step(r, acc, value(s));
  if (r == kMean)
    acc = acc / static_cast<T>(e - b + (self ? 1 : 0));
  target = finished(static_cast<Reduce>(r), acc);
}

} // namespace

bool may_defer_rows_check(const TensorView& vec, std::int64_t num_keys) {
  return defer_index_checks() && !plan_reuse_applies(vec, num_keys);
}

void finish_rows_check(const ScatterArgs& a, const TensorView& vec, std::int64_t num_keys,
                       const Geo4& g, const unsigned long long* bad, cudaStream_t stream) {
  finish_rows_check(a, vec, num_keys, g, bad, stream, may_defer_rows_check(vec, num_keys), false);
}

void finish_rows_check(const ScatterArgs& a, const TensorView& vec, std::int64_t num_keys,
                       const Geo4& g, const unsigned long long* bad, cudaStream_t stream,
                       bool defer, bool reported) {
  if (defer) {
    if (!reported)
      defer_index_error(bad, 1, DeferredIndex{vec.data, vec.dtype == DType::i64, vec.strides[0]},
                        DeferredIndex{}, deferred_scatter_message(a.op, g.M, true), stream);
    return;
  }
  if (const std::int64_t i = first_bad_position(bad, stream); i >= 0) // waits for the stream
    throw_bad_index(a, i, vector_geo(a, g));
  remember_index(vec, num_keys, stream); // may queue a copy of the index (no scratch)
}

namespace {

template <class T> void run_sort_pull(const ScatterArgs& a, cudaStream_t stream) {
  raise_deferred_index_error();
  const Geo4 g = geo4(a);
  if (g.numel == 0)
    return;
  const Rows rw = rows_of(a);
  const bool is64 = a.index.dtype == DType::i64;
  if (rw.ok) {
    const TensorView vec = index_vector(a);
    if (const CachedPlan cached = find_cached_plan(vec, rw.M, stream)) {
      Pull<T> p = rows_pull<T>(a, rw);
      p.order = cached.order;
      p.offsets = cached.offsets;
      launch_pull(p, a.reduce, stream);
      append_last_explain("; the index equals the copy kept at its address, so its plan was reused "
                          "(automatic plan reuse: no sort)");
      return;
    }
    const bool direct = std::is_same_v<T, float> && rw.F == 1;
    const SortLayout layout = sort_layout(rw.L, rw.M, true, direct);
    // A short index sorted by one block: its sort's result is kept for the next calls on this
    // stream with an index of its length and targets, which compare the index with the kept
    // copies on the device and sort only when none is equal (short_plan; same bits either way,
    // no wait).
    ShortPlan reuse;
    if (layout.block && !direct)
      reuse = short_plan(vec, rw.M, stream);
    std::optional<DeviceScratch> scratch;
    if (!reuse)
      scratch.emplace(layout.scratch_bytes + 256, a.out.device, Stream{stream});
    const WaitOnUnwind wait_on_error(stream);
    auto* bad = reuse ? reuse.bad : scratch->take<unsigned long long>(1);
    // Kept: the sort writes into (or finds) a slot of the entry and names it in
    // reuse.kept.chosen().
    const SortBuffers sb =
        reuse ? block_sort_buffers(layout, reuse.kept.order[0], reuse.kept.offsets[0])
              : sort_buffers(*scratch, layout);
    // No wait after the sort (which sets *bad): bad keys were sorted as 0, and the pull reads the
    // check's result itself and writes nothing when it found one. One round trip to the host per
    // call.
    sort_index_vector(vec, direct ? a.src.data : nullptr, rw.src_row, sb, bad, stream, reuse.kept);
    if (reuse)
      append_last_explain("; the short index is compared on the device with the copy kept for "
                          "each of the last 4 distinct indices of its length on this stream and "
                          "sorted only when none is equal (automatic reuse of short indices)");
    Pull<T> p = rows_pull<T>(a, rw);
    p.order = sb.vals_out;
    p.offsets = sb.offsets;
    if (reuse)
      p.chosen = reuse.kept.chosen();
    p.bad = bad;
    if (direct)
      p.direct = reinterpret_cast<const T*>(sb.vals_out);
    // Deferred: the pull reports a bad index itself, no report kernel after it.
    // Decided once: the setting is process-wide and another thread may change it meanwhile.
    const bool defer = may_defer_rows_check(vec, rw.M);
    const bool reported = defer && pull_launches(p);
    PullReport report;
    if (reported) {
      report.sink = deferred_sink(deferred_scatter_message(a.op, g.M, true));
      report.at = DeferredIndex{vec.data, is64, vec.strides[0]};
    }
    launch_pull(p, a.reduce, stream, report);
    finish_rows_check(a, vec, rw.M, g, bad, stream, defer, reported);
    return; // the report and a remembered copy do not use scratch beyond `bad`, read in order
  }
  const std::int64_t keys = g.out_numel; // (column, target) pairs
  const SortLayout layout = sort_layout(g.numel, keys, /*allow_counting=*/false);
  DeviceScratch scratch(layout.scratch_bytes + 256, a.out.device, Stream{stream});
  const WaitOnUnwind wait_on_error(stream);
  auto* bad = scratch.take<unsigned long long>(1);
  const SortBuffers sb = sort_buffers(scratch, layout);
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
  const int block = scatter_block();
  general_keys_kernel<<<std::min<unsigned>(grid_for(g.numel, block), 1u << 20), block, 0, stream>>>(
      g, a.index.data, is64, sb.keys_in, sb.vals_in, bad);
  SAMEBITS_CUDA_CHECK_LAUNCH("general_keys_kernel");
  if (const std::int64_t e = first_bad_position(bad, stream); e >= 0)
    throw_bad_index(a, e, g);
  sort_pairs_and_offsets(sb, stream);
  general_pull_kernel<T><<<grid_for(keys, block), block, 0, stream>>>(
      g, static_cast<const T*>(a.src.data), static_cast<T*>(a.out.data), sb.vals_out, sb.offsets,
      static_cast<int>(a.reduce), a.include_self, static_cast<T>(a.alpha), a.alpha != 1.0);
  SAMEBITS_CUDA_CHECK_LAUNCH("general_pull_kernel");
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <class T> void run_plan_pull(const ScatterArgs& a, cudaStream_t stream) {
  const Rows rw = rows_of(a);
  if (!rw.ok) {
    // Features not contiguous: pull into contiguous copies, then copy the result back. Every
    // copy runs on the op's stream, after the work queued before the call (which may write src
    // or out), and the copies are allocated for that stream (freed while it may still run).
    using Word = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const Stream st{stream};
    Tensor src = Tensor::empty(a.src.sizes(), a.src.dtype, a.src.device, st),
           out = Tensor::empty(a.out.sizes(), a.out.dtype, a.out.device, st);
    gather_contiguous<Word>(a.src, src.view().data, stream);
    gather_contiguous<Word>(a.out, out.view().data, stream);
    ScatterArgs c = a;
    c.src = src.view();
    c.out = out.view();
    run_plan_pull<T>(c, stream);
    const TensorView dst = a.out;
    copy_strided<Word>(out.view(), a.out.data, &dst, stream);
    return;
  }
  if (rw.L == 0)
    return;
  Pull<T> p = rows_pull<T>(a, rw);
  p.order = a.plan->order.data<std::int64_t>();
  p.offsets = a.plan->offsets.data<std::int64_t>();
  p.ord64 = true;
  launch_pull(p, a.reduce, stream);
}

template <void (*F32)(const ScatterArgs&, cudaStream_t),
          void (*F64)(const ScatterArgs&, cudaStream_t)>
void by_dtype(const ScatterArgs& a, const Workspace& ws) {
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  if (a.src.dtype == DType::f32)
    F32(a, stream);
  else
    F64(a, stream);
}

// The sorts' keys and positions are 32-bit. A rows scatter (one index value per row of src) sorts
// its index: L positions into M target rows, however many features each row has. Any other
// scatter sorts every source element by its (column, target) key.
std::string sort_why_not(const ScatterArgs& a) {
  const auto big = static_cast<std::int64_t>(std::numeric_limits<int>::max());
  if (const Rows rw = rows_of(a); rw.ok) {
    if (rw.L >= big || rw.M >= big)
      return "more than 2^31 - 1 index positions or target rows (32-bit sort keys)";
    return "";
  }
  if (a.src.numel() >= big || a.out.numel() >= big)
    return "more than 2^31 - 1 sources or output elements (32-bit sort keys)";
  return "";
}

Variant<ScatterArgs> variant(const char* op, const char* name, Determinism level, const char* how,
                             void (*run)(const ScatterArgs&, const Workspace&), bool sorts) {
  Variant<ScatterArgs> v{{op, name, DeviceType::cuda, level, how}, refuse_half, nullptr, run};
  if (sorts)
    v.why_not = [](const ScatterArgs& a) {
      const std::string half = refuse_half(a);
      return half.empty() ? sort_why_not(a) : half;
    };
  return v;
}

} // namespace

void register_cuda_scatter(Registry& r) {
  register_cuda_index_plan(r);
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  const char* atomic_how = "atomicAdd / atomicCAS into targets in hardware schedule order";
  const char* sort_how =
      "stable sort of (index, position) every call (one block's counting sort "
      "up to 16384 positions into 2944 targets, one block's radix sort up to 11264 "
      "positions, or 16384 into at most 65535 targets when no values are "
      "carried; a counting sort up to "
      "1536 targets, CUB radix sort beyond), "
      "then ordered pull per target; an index passed again at the same address "
      "reuses its plan when its contents compare equal";
  auto atomic = run_atomic_scatter;
  auto sorted = by_dtype<run_sort_pull<float>, run_sort_pull<double>>;
  for (const char* op : {"index_add", "scatter_add", "scatter_reduce"}) {
    r.add(variant(op, "cuda.atomic", ng, atomic_how, atomic, false));
    if (std::string_view(op) != "scatter_reduce")
      r.add(fixed_point_variant(op));
    r.add(variant(op, "cuda.sort_pull", po, sort_how, sorted, true));
  }
  r.add(variant("index_add_plan", "cuda.plan_pull", po,
                "ordered pull per target over a reused GPU plan",
                by_dtype<run_plan_pull<float>, run_plan_pull<double>>, false));
}

} // namespace samebits::detail

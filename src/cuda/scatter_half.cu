// CUDA variants of index_add (and index_add with a plan) for bfloat16 and float16 tensors, read
// and written in place (no float32 copies of src or out):
//
//   cuda.half_atomic     not_guaranteed  what PyTorch does: each contribution (alpha * src
//                                        rounded to the dtype when alpha != 1) added into its
//                                        target with a 16-bit atomicAdd, in hardware order
//   cuda.half_sort_pull  portable        stable sort of the index (or the plan kept for an index
//                                        passed again), then each target pulls its sources in
//                                        ascending order, accumulating in float32
//   cuda.half_plan_pull  portable        the same pull over a plan built once
//
// The pull is the canonical order of include/samebits/ops/scatter.hpp computed in float32, as
// the CPU computes it (through its float32 variants): acc = float(out[t]); acc = acc + c for each
// source in ascending order (c = float(src), or float(alpha) * float(src) rounded to float32);
// out[t] = acc rounded once to the dtype. The conversions are samebits/half.hpp's integer
// rounding, the same code on both sides, so portable results are the CPU's bits.
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "cuda/index_plan.cuh"
#include "cuda/register.hpp"
#include "cuda/scatter_shared.cuh"
#include "ops/scatter.hpp"
#include "samebits/half.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits>
#include <type_traits>

namespace samebits::detail {

namespace {

template <class H> __device__ __forceinline__ float load_float(const H* p) {
  if constexpr (std::is_same_v<H, bf16>)
    return half_bits::float_from_bf16(p->bits);
  else
    return half_bits::float_from_f16(p->bits);
}

template <class H> __device__ __forceinline__ std::uint16_t round_bits(float f) {
  if constexpr (std::is_same_v<H, bf16>)
    return half_bits::bf16_from_float(f);
  else
    return half_bits::f16_from_float(f);
}

// --- validation ---------------------------------------------------------------------------------

__global__ void half_check_kernel(const void* idx, bool is64, std::int64_t stride, std::int64_t n,
                                  std::int64_t M, unsigned long long* bad) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t m = load_index(idx, is64, i * stride);
    if (m < 0 || m >= M)
      atomicMin(bad, static_cast<unsigned long long>(i));
  }
}

// --- atomic (not_guaranteed) --------------------------------------------------------------------

template <class H>
__global__ void half_atomic_kernel(const H* src, const void* idx, bool is64, std::int64_t istride,
                                   H* out, std::int64_t L, std::int64_t F, std::int64_t src_row,
                                   std::int64_t out_row, float alpha, bool scaled) {
  const std::int64_t total = L * F;
  for (std::int64_t g = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; g < total;
       g += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = g / F, f = g - i * F;
    const std::int64_t m = load_index(idx, is64, i * istride);
    std::uint16_t c = src[i * src_row + f].bits;
    if (scaled) // PyTorch multiplies in the dtype: the product rounded once
      c = round_bits<H>(__fmul_rn(load_float(src + i * src_row + f), alpha));
    H* target = out + m * out_row + f;
    if constexpr (std::is_same_v<H, bf16>) {
      __nv_bfloat16_raw raw;
      raw.x = c;
      atomicAdd(reinterpret_cast<__nv_bfloat16*>(target), __nv_bfloat16(raw));
    } else {
      __half_raw raw;
      raw.x = c;
      atomicAdd(reinterpret_cast<__half*>(target), __half(raw));
    }
  }
}

// --- pull (portable) ----------------------------------------------------------------------------

template <class H> struct HalfPull {
  const H* src = nullptr;
  H* out = nullptr;
  const void* order = nullptr;   // sorted source rows
  const void* offsets = nullptr; // [M + 1]
  bool ord64 = false;
  const unsigned long long* bad = nullptr; // set: the index check's result gates the pull
  std::int64_t M = 0, F = 1, src_row = 0, out_row = 0;
  float alpha = 1.0f;
  bool scaled = false;
};

// One item per (target, V consecutive features): V = 8 reads and writes 16 bytes at a time.
// Every item runs its target's chain over the sources in sorted order, so the launch shape
// cannot change a result.
template <class H, int V> __global__ void __launch_bounds__(256) half_pull_kernel(HalfPull<H> p) {
  if (p.bad != nullptr && *p.bad != ~0ull)
    return;
  const std::int64_t chunks = p.F / V, items = p.M * chunks;
  using Word = std::conditional_t<V == 8, uint4, std::uint16_t>;
  for (std::int64_t it = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       it < items; it += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = it / chunks, c = it - t * chunks;
    const std::int64_t b = load_index(p.offsets, p.ord64, t),
                       e = load_index(p.offsets, p.ord64, t + 1);
    if (b == e)
      continue; // no contribution: the target keeps its bits
    H* o = p.out + t * p.out_row + c * V;
    float acc[V];
    {
      const Word w = *reinterpret_cast<const Word*>(o);
      const H* h = reinterpret_cast<const H*>(&w);
#pragma unroll
      for (int j = 0; j < V; ++j)
        acc[j] = load_float(h + j);
    }
    for (std::int64_t s = b; s < e; ++s) {
      const std::int64_t row = load_index(p.order, p.ord64, s);
      const Word w = __ldg(reinterpret_cast<const Word*>(p.src + row * p.src_row + c * V));
      const H* h = reinterpret_cast<const H*>(&w);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float v = load_float(h + j);
        acc[j] = __fadd_rn(acc[j], p.scaled ? __fmul_rn(p.alpha, v) : v);
      }
    }
    Word w;
    H* h = reinterpret_cast<H*>(&w);
#pragma unroll
    for (int j = 0; j < V; ++j)
      h[j].bits = round_bits<H>(acc[j]);
    *reinterpret_cast<Word*>(o) = w;
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

template <class H> void launch_half_pull(const HalfPull<H>& p, cudaStream_t stream) {
  if (p.M == 0 || p.F == 0)
    return;
  const bool wide = p.F % 8 == 0 && p.src_row % 8 == 0 && p.out_row % 8 == 0 && aligned16(p.src) &&
                    aligned16(p.out);
  const std::int64_t items = p.M * (wide ? p.F / 8 : p.F);
  const unsigned grid = std::min<unsigned>(grid_for(items, 256), 1u << 20);
  if (wide)
    half_pull_kernel<H, 8><<<grid, 256, 0, stream>>>(p);
  else
    half_pull_kernel<H, 1><<<grid, 256, 0, stream>>>(p);
  SAMEBITS_CUDA_CHECK_LAUNCH("half_pull_kernel");
}

// --- the variants -------------------------------------------------------------------------------

// Runs f on rows of contiguous features: the arguments themselves, or contiguous copies of src
// and out whose result is copied back.
template <class F> void with_rows(const ScatterArgs& a, cudaStream_t stream, F&& f) {
  const Rows rw = rows_of(a);
  if (rw.ok)
    return f(a, rw);
  Tensor src = Tensor::copy_of(a.src), out = Tensor::copy_of(a.out);
  ScatterArgs c = a;
  c.src = src.view();
  c.out = out.view();
  f(c, rows_of(c));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream)); // copy() runs on the default stream
  copy(out.view(), a.out);
}

template <class H> HalfPull<H> half_pull_of(const ScatterArgs& a, const Rows& rw) {
  HalfPull<H> p;
  p.src = static_cast<const H*>(a.src.data);
  p.out = static_cast<H*>(a.out.data);
  p.M = rw.M;
  p.F = rw.F;
  p.src_row = rw.src_row;
  p.out_row = rw.out_row;
  p.alpha = static_cast<float>(a.alpha);
  p.scaled = a.alpha != 1.0;
  return p;
}

template <class H> void half_atomic(const ScatterArgs& a, cudaStream_t stream) {
  with_rows(a, stream, [&](const ScatterArgs& x, const Rows& rw) {
    if (rw.L == 0)
      return;
    DeviceScratch scratch(256, x.out.device, Stream{stream});
    auto* bad = scratch.take<unsigned long long>(1);
    const TensorView vec = index_vector(x);
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));
    half_check_kernel<<<std::min<unsigned>(grid_for(rw.L, 256), 4096u), 256, 0, stream>>>(
        vec.data, vec.dtype == DType::i64, vec.stride(0), rw.L, rw.M, bad);
    SAMEBITS_CUDA_CHECK_LAUNCH("half_check_kernel");
    if (const std::int64_t i = first_bad_position(bad, stream); i >= 0)
      throw_bad_index(x, i, vector_geo(x, geo4(x)));
    if (rw.F == 0)
      return;
    const unsigned grid = std::min<unsigned>(grid_for(rw.L * rw.F, 256), 1u << 20);
    half_atomic_kernel<H><<<grid, 256, 0, stream>>>(
        static_cast<const H*>(x.src.data), vec.data, vec.dtype == DType::i64, vec.stride(0),
        static_cast<H*>(x.out.data), rw.L, rw.F, rw.src_row, rw.out_row,
        static_cast<float>(x.alpha), x.alpha != 1.0);
    SAMEBITS_CUDA_CHECK_LAUNCH("half_atomic_kernel");
  });
}

template <class H> void half_sort_pull(const ScatterArgs& a, cudaStream_t stream) {
  raise_deferred_index_error();
  with_rows(a, stream, [&](const ScatterArgs& x, const Rows& rw) {
    if (rw.L == 0)
      return;
    const TensorView vec = index_vector(x);
    if (const CachedPlan cached = find_cached_plan(vec, rw.M, stream)) {
      HalfPull<H> p = half_pull_of<H>(x, rw);
      p.order = cached.order;
      p.offsets = cached.offsets;
      launch_half_pull(p, stream);
      append_last_explain("; the index equals the copy kept at its address, so its plan was reused "
                          "(automatic plan reuse: no sort)");
      return;
    }
    const SortLayout layout = sort_layout(rw.L, rw.M);
    DeviceScratch scratch(layout.scratch_bytes + 256, x.out.device, Stream{stream});
    const WaitOnUnwind wait_on_error(stream);
    auto* bad = scratch.take<unsigned long long>(1);
    const SortBuffers sb = sort_buffers(scratch, layout);
    sort_index_vector(vec, nullptr, 0, sb, bad, stream); // sets *bad
    HalfPull<H> p = half_pull_of<H>(x, rw);
    p.order = sb.vals_out;
    p.offsets = sb.offsets;
    p.bad = bad;
    launch_half_pull(p, stream);
    finish_rows_check(x, vec, rw.M, geo4(x), bad, stream);
  });
}

template <class H> void half_plan_pull(const ScatterArgs& a, cudaStream_t stream) {
  with_rows(a, stream, [&](const ScatterArgs& x, const Rows& rw) {
    if (rw.L == 0)
      return;
    HalfPull<H> p = half_pull_of<H>(x, rw);
    p.order = x.plan->order.data<std::int64_t>();
    p.offsets = x.plan->offsets.data<std::int64_t>();
    p.ord64 = true;
    launch_half_pull(p, stream);
  });
}

template <void (*B)(const ScatterArgs&, cudaStream_t), void (*F)(const ScatterArgs&, cudaStream_t)>
void by_half(const ScatterArgs& a, const Workspace& ws) {
  (a.src.dtype == DType::bf16 ? B : F)(a, SAMEBITS_STREAM(ws.stream));
}

std::string half_why_not(const ScatterArgs& a) {
  if (!is_half(a.src.dtype))
    return "bfloat16/float16 only (float32/float64 take the variants above)";
  const auto big = static_cast<std::int64_t>(std::numeric_limits<int>::max());
  if (a.plan == nullptr && (a.src.size(0) >= big || a.out.size(0) >= big))
    return "more than 2^31 - 1 source rows or targets (32-bit sort keys)";
  return "";
}

Variant<ScatterArgs> half_variant(const char* op, const char* name, Determinism level,
                                  const char* how,
                                  void (*run)(const ScatterArgs&, const Workspace&)) {
  return Variant<ScatterArgs>{{op, name, DeviceType::cuda, level, how}, half_why_not, nullptr, run};
}

} // namespace

std::string refuse_half(const ScatterArgs& a) {
  return is_half(a.src.dtype) ? "float32/float64 only (bfloat16/float16 take cuda.half_*)" : "";
}

void register_cuda_scatter_half(Registry& r) {
  const auto ng = Determinism::not_guaranteed, po = Determinism::portable;
  r.add(half_variant("index_add", "cuda.half_atomic", ng,
                     "16-bit atomicAdd into targets in hardware schedule order (as PyTorch)",
                     by_half<half_atomic<bf16>, half_atomic<f16>>));
  r.add(half_variant("index_add", "cuda.half_sort_pull", po,
                     "stable sort of the index (or its kept plan), then an ordered float32 pull "
                     "per target, rounded once",
                     by_half<half_sort_pull<bf16>, half_sort_pull<f16>>));
  r.add(half_variant("index_add_plan", "cuda.half_plan_pull", po,
                     "ordered float32 pull per target over a reused GPU plan, rounded once",
                     by_half<half_plan_pull<bf16>, half_plan_pull<f16>>));
}

} // namespace samebits::detail

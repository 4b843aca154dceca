// CUDA variants of bincount and histc.
//
//   bincount  cuda.float_atomics  not_guaranteed  weights summed with float atomics (per-block
//                                                 shared-memory bins when they fit, then global
//                                                 atomics) in arrival order
//             cuda.fixed_point    portable        weights as exact int64 fixed point (scale from
//                                                 max |w|, ops/histogram.hpp) with integer
//                                                 atomics: bitwise equal to cpu.fixed_point
//   histc     cuda.int_counts     portable        integer counts (replicated shared-memory
//                                                 counters), PyTorch's bin formula in x's dtype
// Counts are exact integers in every variant. The fixed point first finds max |w| in a pass over
// the weights; the accumulation checks each index as it reads it (a bad one adds nothing and the
// smallest bad position is kept); results are accumulated in the workspace and written to `out`
// once, by a last pass that writes nothing when an index was bad. The host waits once, at the end.
// Launch choice: ops/histogram_choice.cpp (HistogramTuning::alternative: 64-thread blocks on a
// small grid; the same bits).
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/fixed_point.cuh"
#include "cuda/launch.cuh"
#include "cuda/register.hpp"
#include "ops/histogram.hpp"
#include "ops/histogram_choice.hpp"

#include <climits>
#include <cuda_runtime.h>
#include <string>

namespace samebits::detail {

namespace {

using i64 = long long;
using u64 = unsigned long long;

using Launch = HistogramLaunch;

// Grid-stride loop over [0, n) that issues U loads (load(i)) before using them (use(i, v)), so
// that each thread keeps several loads in flight; every i is visited exactly once.
template <int U, class Load, class Use>
__device__ __forceinline__ void for_each_unrolled(i64 n, Load&& load, Use&& use) {
  const i64 step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i0 = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i0 < n; i0 += step * U) {
    decltype(load(i0)) v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i0 + u * step < n)
        v[u] = load(i0 + u * step);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i0 + u * step < n)
        use(i0 + u * step, v[u]);
  }
}

template <class W> struct IdxVal {
  i64 b;
  W w;
};
constexpr int kUnroll = 4;

// max |w| over the finite weights and whether any weight is non-finite (the fixed point's scale).
template <class T> __global__ void max_weight_kernel(const T* w, i64 sw, i64 n, CheckResult* res) {
  double m = 0;
  unsigned sp = 0;
  for_each_unrolled<kUnroll>(
      n, [&](i64 i) { return static_cast<double>(w[i * sw]); },
      [&](i64, double v) {
        if (isfinite(v))
          m = fmax(m, fabs(v));
        else
          sp = 1;
      });
  publish_check(ULLONG_MAX, m, sp, res);
}

// An index outside [0, bins) adds nothing and lowers res->first_bad to its position; every
// position is visited, so the smallest is found.
__device__ __forceinline__ bool valid_bin(i64 b, i64 bins, i64 i, CheckResult* res) {
  if (b >= 0 && b < bins)
    return true;
  atomicMin(&res->first_bad, static_cast<u64>(i));
  return false;
}

// Exact integer sums per bin: 1 per element (counts) or the fixed-point weight. Shared-memory
// bins per block when they fit, flushed with global integer atomics (order-independent).
template <class I, class T, bool Weighted>
__global__ void int_hist_kernel(const I* idx, i64 si, const T* w, i64 sw, i64 n, i64 bins,
                                CheckResult* res, u64* acc, unsigned* mask, bool smem) {
  extern __shared__ u64 sh[];
  const int s =
      Weighted ? fixed_point_shift(n, __longlong_as_double(static_cast<long long>(res->max_bits)))
               : 0;
  if (smem) {
    for (i64 b = threadIdx.x; b < bins; b += blockDim.x)
      sh[b] = 0;
    __syncthreads();
  }
  for_each_unrolled<kUnroll>(
      n,
      [&](i64 i) {
        return IdxVal<T>{static_cast<i64>(idx[i * si]), Weighted ? w[i * sw] : T(0)};
      },
      [&](i64 i, const IdxVal<T>& e) {
        if (!valid_bin(e.b, bins, i, res))
          return;
        i64 q = 1;
        if constexpr (Weighted) {
          const double d = static_cast<double>(e.w);
          if (isfinite(d)) {
            q = __double2ll_rn(scale_pow2(d, s));
          } else {
            atomicOr(&mask[e.b], special_bit(d));
            q = 0;
          }
        }
        if (q != 0) {
          if (smem)
            atomicAdd(&sh[e.b], static_cast<u64>(q));
          else
            atomicAdd(&acc[e.b], static_cast<u64>(q));
        }
      });
  if (smem) {
    __syncthreads();
    for (i64 b = threadIdx.x; b < bins; b += blockDim.x)
      if (sh[b] != 0)
        atomicAdd(&acc[b], sh[b]);
  }
}

// Float atomics (the not_guaranteed variant): the sums' last bits follow the arrival order.
template <class I, class T>
__global__ void float_hist_kernel(const I* idx, i64 si, const T* w, i64 sw, i64 n, i64 bins,
                                  CheckResult* res, T* acc, bool smem) {
  extern __shared__ unsigned char raw[];
  T* sh = reinterpret_cast<T*>(raw);
  if (smem) {
    for (i64 b = threadIdx.x; b < bins; b += blockDim.x)
      sh[b] = T(0);
    __syncthreads();
  }
  for_each_unrolled<kUnroll>(
      n,
      [&](i64 i) {
        return IdxVal<T>{static_cast<i64>(idx[i * si]), w[i * sw]};
      },
      [&](i64 i, const IdxVal<T>& e) {
        if (!valid_bin(e.b, bins, i, res))
          return;
        if (smem)
          atomicAdd(&sh[e.b], e.w);
        else
          atomicAdd(&acc[e.b], e.w);
      });
  if (smem) {
    __syncthreads();
    for (i64 b = threadIdx.x; b < bins; b += blockDim.x)
      atomicAdd(&acc[b], sh[b]);
  }
}

// Writes the bins to out: int64 counts, fixed point -> T (the same steps as the CPU), or copies;
// nothing when an index was bad.
template <class T, int Kind> // 0: counts, 1: fixed point, 2: float sums
__global__ void finalize_kernel(const void* acc, const unsigned* mask, const CheckResult* res,
                                i64 n, void* out, i64 so, i64 bins) {
  if (res->first_bad != ULLONG_MAX)
    return;
  const int s =
      Kind == 1 ? fixed_point_shift(n, __longlong_as_double(static_cast<long long>(res->max_bits)))
                : 0;
  const unsigned* special = Kind == 1 && res->special != 0 ? mask : nullptr;
  for (i64 b = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; b < bins;
       b += static_cast<i64>(gridDim.x) * blockDim.x) {
    if constexpr (Kind == 0) {
      static_cast<i64*>(out)[b * so] = static_cast<i64>(static_cast<const u64*>(acc)[b]);
    } else if constexpr (Kind == 1) {
      const auto q = static_cast<i64>(static_cast<const u64*>(acc)[b]);
      T r = static_cast<T>(scale_pow2(static_cast<double>(q), -s));
      if (special != nullptr && special[b] != 0)
        r = special_value<T>(special[b]);
      static_cast<T*>(out)[b * so] = r;
    } else {
      static_cast<T*>(out)[b * so] = static_cast<const T*>(acc)[b];
    }
  }
}

constexpr std::size_t align_up(std::size_t b) {
  return (b + 255) / 256 * 256;
}

std::size_t bincount_workspace(const BincountArgs& a) {
  const auto bins = static_cast<std::size_t>(a.out.numel());
  return align_up(sizeof(CheckResult)) + align_up(bins * 8) + align_up(bins * sizeof(unsigned));
}

template <bool Canonical> void bincount_cuda(const BincountArgs& a, const Workspace& ws) {
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  const i64 n = a.index.numel(), bins = a.out.numel();
  char* wsp = static_cast<char*>(ws.data);
  auto* res = reinterpret_cast<CheckResult*>(wsp);
  void* acc = wsp + align_up(sizeof(CheckResult));
  auto* mask = reinterpret_cast<unsigned*>(wsp + align_up(sizeof(CheckResult)) +
                                           align_up(static_cast<std::size_t>(bins) * 8));
  const bool weighted = a.weighted();
  const bool is64 = a.index.dtype == DType::i64;
  const bool f32 = !weighted || a.weights.dtype == DType::f32;
  const i64 si = n > 0 ? a.index.stride(0) : 1, sw = weighted && n > 0 ? a.weights.stride(0) : 1;
  auto with_types = [&](auto&& f) { // f(I*, T*) with the index and weight types
    if (is64) {
      if (f32)
        f(static_cast<const i64*>(a.index.data), static_cast<const float*>(a.weights.data));
      else
        f(static_cast<const i64*>(a.index.data), static_cast<const double*>(a.weights.data));
    } else {
      if (f32)
        f(static_cast<const int*>(a.index.data), static_cast<const float*>(a.weights.data));
      else
        f(static_cast<const int*>(a.index.data), static_cast<const double*>(a.weights.data));
    }
  };
  // 1. max |w| for the fixed point. The accumulation checks each index on the way (a bad one adds
  // nothing and is remembered), the last pass writes `out` only when all were valid, and the
  // host waits once, at the end.
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(res, 0, sizeof(CheckResult), stream));
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(&res->first_bad, 0xff, sizeof(u64), stream));
  const BincountChoice c = choose_bincount_kernel(
      n, bins, weighted ? static_cast<int>(size_of(a.weights.dtype)) : 0, Canonical, sm_count());
  const Launch l = c.accumulate;
  const bool fixed = c.fixed_point;
  if (fixed && n > 0) {
    with_types([&](auto*, auto* wp) {
      max_weight_kernel<<<l.grid, l.block, 0, stream>>>(wp, sw, n, res);
    });
    SAMEBITS_CUDA_CHECK_LAUNCH("max_weight_kernel");
  }
  // 2. Accumulate into the workspace.
  const std::size_t elem = !weighted || Canonical ? 8 : (f32 ? 4 : 8);
  if (bins > 0)
    SAMEBITS_CUDA_CHECK(cudaMemsetAsync(acc, 0, static_cast<std::size_t>(bins) * elem, stream));
  if (fixed && bins > 0)
    SAMEBITS_CUDA_CHECK(
        cudaMemsetAsync(mask, 0, static_cast<std::size_t>(bins) * sizeof(unsigned), stream));
  const bool smem = c.shared_bins;
  const std::size_t smem_bytes = c.smem_bytes;
  if (n > 0) {
    with_types([&](auto* ip, auto* wp) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(wp)>>;
      using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
      if (!weighted)
        int_hist_kernel<I, T, false><<<l.grid, l.block, smem_bytes, stream>>>(
            ip, si, wp, sw, n, bins, res, static_cast<u64*>(acc), mask, smem);
      else if (Canonical)
        int_hist_kernel<I, T, true><<<l.grid, l.block, smem_bytes, stream>>>(
            ip, si, wp, sw, n, bins, res, static_cast<u64*>(acc), mask, smem);
      else
        float_hist_kernel<<<l.grid, l.block, smem_bytes, stream>>>(ip, si, wp, sw, n, bins, res,
                                                                   static_cast<T*>(acc), smem);
    });
    SAMEBITS_CUDA_CHECK_LAUNCH("bincount accumulate");
  }
  // 3. Write out (nothing when an index was bad).
  const Launch lf = c.finalize;
  const i64 so = bins > 0 ? a.out.stride(0) : 1;
  const unsigned* m = fixed ? mask : nullptr;
  if (!weighted)
    finalize_kernel<float, 0>
        <<<lf.grid, lf.block, 0, stream>>>(acc, nullptr, res, n, a.out.data, so, bins);
  else if (f32 && Canonical)
    finalize_kernel<float, 1>
        <<<lf.grid, lf.block, 0, stream>>>(acc, m, res, n, a.out.data, so, bins);
  else if (Canonical)
    finalize_kernel<double, 1>
        <<<lf.grid, lf.block, 0, stream>>>(acc, m, res, n, a.out.data, so, bins);
  else if (f32)
    finalize_kernel<float, 2>
        <<<lf.grid, lf.block, 0, stream>>>(acc, nullptr, res, n, a.out.data, so, bins);
  else
    finalize_kernel<double, 2>
        <<<lf.grid, lf.block, 0, stream>>>(acc, nullptr, res, n, a.out.data, so, bins);
  SAMEBITS_CUDA_CHECK_LAUNCH("bincount finalize");
  CheckResult h{};
  SAMEBITS_CUDA_CHECK(cudaMemcpyAsync(&h, res, sizeof h, cudaMemcpyDeviceToHost, stream));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (h.first_bad != ULLONG_MAX) {
    const auto pos = static_cast<i64>(h.first_bad);
    const i64 value = read_index_value(a.index, pos * si);
    // (no fmt in CUDA sources: its consteval format strings do not compile under nvcc)
    throw IndexOutOfRange("bincount: index[" + std::to_string(pos) +
                          "] = " + std::to_string(value) + " is outside [0, " +
                          std::to_string(bins) + ") (out has " + std::to_string(bins) + " bins)");
  }
}

// histc: R replicas of the shared 32-bit counters (warp w uses replica w % R) spread the
// contention of few bins; flushed with 64-bit global atomics.
template <class T>
__global__ void histc_kernel(const T* x, i64 n, T lo, T hi, i64 bins, int replicas, u64* acc,
                             bool smem) {
  extern __shared__ unsigned shc[];
  if (smem) {
    for (i64 b = threadIdx.x; b < bins * replicas; b += blockDim.x)
      shc[b] = 0;
    __syncthreads();
  }
  unsigned* mine = shc + static_cast<i64>((threadIdx.x >> 5) % replicas) * bins;
  for_each_unrolled<2 * kUnroll>(
      n, [&](i64 i) { return x[i]; },
      [&](i64, T v) {
        const i64 b = histc_bin<T>(v, lo, hi, bins);
        if (b >= 0) {
          if (smem)
            atomicAdd(&mine[b], 1u);
          else
            atomicAdd(&acc[b], 1ull);
        }
      });
  if (smem) {
    __syncthreads();
    for (i64 b = threadIdx.x; b < bins; b += blockDim.x) {
      u64 c = 0;
      for (int r = 0; r < replicas; ++r)
        c += shc[r * bins + b];
      if (c != 0)
        atomicAdd(&acc[b], c);
    }
  }
}

template <class T> __global__ void histc_finalize(const u64* acc, T* out, i64 so, i64 bins) {
  for (i64 b = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; b < bins;
       b += static_cast<i64>(gridDim.x) * blockDim.x)
    out[b * so] = static_cast<T>(acc[b]);
}

std::size_t histc_workspace(const HistcArgs& a) {
  return align_up(static_cast<std::size_t>(a.out.numel()) * 8);
}

void histc_cuda(const HistcArgs& a, const Workspace& ws) {
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  Tensor xc;
  const TensorView x =
      a.x.is_contiguous() ? a.x : (xc = Tensor::copy_of(a.x, a.x.device, ws.stream)).view();
  const i64 n = x.numel(), bins = a.out.numel();
  auto* acc = static_cast<u64*>(ws.data);
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(acc, 0, static_cast<std::size_t>(bins) * 8, stream));
  const HistcChoice c = choose_histc_kernel(n, bins, sm_count());
  const Launch l = c.count;
  const bool smem = c.shared_bins;
  const int replicas = c.replicas;
  const std::size_t smem_bytes = c.smem_bytes;
  const i64 so = a.out.stride(0);
  const Launch lf = c.finalize;
  if (x.dtype == DType::f32) {
    if (n > 0)
      histc_kernel<float><<<l.grid, l.block, smem_bytes, stream>>>(
          static_cast<const float*>(x.data), n, static_cast<float>(a.lo), static_cast<float>(a.hi),
          bins, replicas, acc, smem);
    SAMEBITS_CUDA_CHECK_LAUNCH("histc_kernel");
    histc_finalize<float>
        <<<lf.grid, lf.block, 0, stream>>>(acc, static_cast<float*>(a.out.data), so, bins);
  } else {
    if (n > 0)
      histc_kernel<double><<<l.grid, l.block, smem_bytes, stream>>>(
          static_cast<const double*>(x.data), n, a.lo, a.hi, bins, replicas, acc, smem);
    SAMEBITS_CUDA_CHECK_LAUNCH("histc_kernel");
    histc_finalize<double>
        <<<lf.grid, lf.block, 0, stream>>>(acc, static_cast<double*>(a.out.data), so, bins);
  }
  SAMEBITS_CUDA_CHECK_LAUNCH("histc_finalize");
  if (xc.defined() && xc.numel() > 0)
    SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream)); // xc is freed next
}

} // namespace

void register_cuda_histogram(Registry& r) {
  r.add(Variant<BincountArgs>{
      {"bincount", "cuda.float_atomics", DeviceType::cuda, Determinism::not_guaranteed,
       "float atomics in arrival order (shared-memory bins when they fit); counts exact"},
      nullptr,
      bincount_workspace,
      bincount_cuda<false>});
  r.add(Variant<BincountArgs>{
      {"bincount", "cuda.fixed_point", DeviceType::cuda, Determinism::portable,
       "exact int64 fixed point with integer atomics, scale from max |w|; counts exact"},
      nullptr,
      bincount_workspace,
      bincount_cuda<true>});
  r.add(Variant<HistcArgs>{
      {"histc", "cuda.int_counts", DeviceType::cuda, Determinism::portable,
       "integer counts in replicated shared-memory counters, PyTorch's bin formula"},
      nullptr,
      histc_workspace,
      histc_cuda});
}

} // namespace samebits::detail

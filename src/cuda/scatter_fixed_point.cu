// The cuda.fixed_point variant of index_add and scatter_add (run_to_run): float32 sums as exact
// int64 fixed point, the same integers in any order (ops/fixed_point.hpp has the definition;
// include/samebits/ops/scatter.hpp says when it applies).
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/deferred_checks.cuh"
#include "cuda/fixed_point.cuh"
#include "cuda/launch.cuh"
#include "cuda/scatter_shared.cuh"
#include "ops/fixed_point.hpp"

#include <array>
#include <atomic>
#include <climits>
#include <cooperative_groups.h>
#include <string>

namespace samebits::detail {

namespace {

// Float32 sums as exact int64 fixed point (ops/fixed_point.hpp): one pass checks the indices and
// finds max |c| over the contributions c; integer atomics then add the scaled contributions in
// any order to the same integers; a last pass writes float(double(out) + double(sum) * 2^-s) (the
// header's formula, the same roundings everywhere) into every target whose sum is not zero or that
// received a non-finite value. A target whose contributions sum to exactly zero keeps its bits.

// Where the e-th contribution comes from and goes to. Rows: e = i * F + f over L rows of F
// features (the index read once per row); otherwise any scatter through Geo4. The target is
// row-major over out's shape: site.target + (index value) * target_mult.
struct FixedSites {
  bool rows = false;
  Geo4 g;
  std::int64_t F = 1, src_row = 0, istride = 0;
  std::int64_t out_mult[4] = {1, 1, 1, 1}; // row-major multipliers of out's shape
  std::int64_t target_mult = 1;            // out_mult[dim]
};

struct FixedSite {
  std::int64_t src = 0, index = 0, target = 0, pos = 0; // pos: the position an error names
};

// The site of contribution e when s.rows.
__device__ __forceinline__ FixedSite fixed_row_site(const FixedSites& s, std::int64_t e) {
  FixedSite r;
  std::int64_t i, f;
  if (s.g.numel < (std::int64_t{1} << 32)) {
    i = static_cast<unsigned>(e) / static_cast<unsigned>(s.F);
    f = static_cast<unsigned>(e) - static_cast<unsigned>(i) * static_cast<unsigned>(s.F);
  } else {
    i = e / s.F;
    f = e - i * s.F;
  }
  r.src = i * s.src_row + f;
  r.index = i * s.istride;
  r.target = f;
  r.pos = i;
  return r;
}

__device__ __forceinline__ FixedSite fixed_site(const FixedSites& s, std::int64_t e) {
  if (s.rows)
    return fixed_row_site(s, e);
  FixedSite r;
  std::int64_t c[4];
  r.src = offset_of(e, s.g.size, s.g.src_st, s.g.nd, c);
  for (int j = 0; j < s.g.nd; ++j) {
    r.index += c[j] * s.g.idx_st[j];
    if (j != s.g.d)
      r.target += c[j] * s.out_mult[j];
  }
  r.pos = e;
  return r;
}

// Sites a thread loads before it uses them, in the one-block kernel's loops (16 sites a thread
// there): the loads of a batch are in flight together instead of one latency per site. Min, max
// and integer sums do not depend on the order, so neither do the bits.
constexpr int kSiteBatch = 4;
// Sites a thread of the cluster kernel keeps in registers from the check to the sums, when every
// thread has at most this many (16384 sites: a GCNConv degree count on Cora has 13264). With 1024
// threads a block (64 registers a thread), 4 spill a register.
constexpr int kKeptSites = 2;
// So every rows call of the cluster keeps its sites; the general instance serves the other shapes.
static_assert(kFixedOneBlockMaxContributions <=
              std::int64_t{kFixedClusterBlocks} * kFixedOneBlockThreads * kKeptSites);

// A thread's batch of sites e0, e0 + step, ... (up to N, below n; zeros past n): each one's index
// value, the position an error names, its target before the index's part and its source value.
// Loaded together, then checked and summed from registers.
template <int N = kSiteBatch> struct SiteBatch {
  std::int64_t index[N], pos[N], target[N];
  float v[N];
};

// (RowsOnly: the caller knows s.rows, and the general sites' code is left out.)
template <bool RowsOnly = false, int N>
__device__ __forceinline__ void load_site_batch(const FixedSites& s, const float* src,
                                                const void* idx, bool is64, std::int64_t e0,
                                                std::int64_t step, SiteBatch<N>& b) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    const std::int64_t e = e0 + u * step;
    if (e < s.g.numel) {
      const FixedSite site = RowsOnly ? fixed_row_site(s, e) : fixed_site(s, e);
      b.index[u] = load_index(idx, is64, site.index);
      b.v[u] = src[site.src];
      b.pos[u] = site.pos;
      b.target[u] = site.target;
    } else {
      b.index[u] = b.pos[u] = b.target[u] = 0;
      b.v[u] = 0;
    }
  }
}

// A thread's running check: the first bad position, max |c| over finite c, any non-finite c.
struct SiteCheck {
  unsigned long long bad = ULLONG_MAX;
  double mx = 0;
  unsigned sp = 0;
};

template <int N>
__device__ __forceinline__ void check_site_batch(const FixedSites& s, const SiteBatch<N>& b,
                                                 std::int64_t e0, std::int64_t step, float alpha,
                                                 bool scaled, SiteCheck& c) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if (e0 + u * step >= s.g.numel)
      break;
    if ((b.index[u] < 0 || b.index[u] >= s.g.M) &&
        static_cast<unsigned long long>(b.pos[u]) < c.bad)
      c.bad = static_cast<unsigned long long>(b.pos[u]);
    const double v = contribution(b.v[u], alpha, scaled);
    if (isfinite(v))
      c.mx = fmax(c.mx, fabs(v));
    else
      c.sp = 1;
  }
}

// One thread's share of the check, sites first, first + step, ...: the first bad position, max |c|
// and whether a contribution is not finite, published into *res.
__device__ __forceinline__ void check_sites(const FixedSites& s, const float* src, const void* idx,
                                            bool is64, float alpha, bool scaled, std::int64_t first,
                                            std::int64_t step, CheckResult* res) {
  SiteCheck c;
  for (std::int64_t e0 = first; e0 < s.g.numel; e0 += step * kSiteBatch) {
    SiteBatch<> b; // the batch's loads first, then its checks
    load_site_batch(s, src, idx, is64, e0, step, b);
    check_site_batch(s, b, e0, step, alpha, scaled, c);
  }
  publish_check(c.bad, c.mx, c.sp, res);
}

__global__ void fixed_check_kernel(FixedSites s, const float* src, const void* idx, bool is64,
                                   float alpha, bool scaled, CheckResult* res) {
  check_sites(s, src, idx, is64, alpha, scaled,
              blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x,
              static_cast<std::int64_t>(gridDim.x) * blockDim.x, res);
}

// False when the check found a bad index (then nothing is written: the host throws after the
// stream is done); else the shift of the check's max |c| (negative for very large values).
__device__ __forceinline__ bool checked_shift(const CheckResult* res, std::int64_t n, int& shift) {
  if (res->first_bad != ULLONG_MAX)
    return false;
  shift = fixed_point_shift(n, __longlong_as_double(static_cast<long long>(res->max_bits)));
  return true;
}

// acc[t] += round(c * 2^shift) for every contribution; non-finite ones set bits of mask[t]. With
// `smem`, each block sums into shared memory first (few targets), then adds its non-zero sums.
__global__ void fixed_add_kernel(FixedSites s, const float* src, const void* idx, bool is64,
                                 float alpha, bool scaled, const CheckResult* res,
                                 unsigned long long* acc, unsigned* mask, bool smem) {
  extern __shared__ unsigned long long fixed_sh[];
  int shift = 0;
  if (!checked_shift(res, s.g.numel, shift))
    return; // the same answer in every thread
  const std::int64_t targets = s.g.out_numel;
  if (smem) {
    for (std::int64_t t = threadIdx.x; t < targets; t += blockDim.x)
      fixed_sh[t] = 0;
    __syncthreads();
  }
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       e < s.g.numel; e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const FixedSite site = fixed_site(s, e);
    const std::int64_t t = site.target + load_index(idx, is64, site.index) * s.target_mult;
    const double c = contribution(src[site.src], alpha, scaled);
    if (!isfinite(c)) {
      atomicOr(mask + t, special_bit(c));
      continue;
    }
    const auto q = static_cast<unsigned long long>(__double2ll_rn(scale_pow2(c, shift)));
    if (q == 0)
      continue;
    if (smem)
      atomicAdd(fixed_sh + t, q);
    else
      atomicAdd(acc + t, q);
  }
  if (smem) {
    __syncthreads();
    for (std::int64_t t = threadIdx.x; t < targets; t += blockDim.x)
      if (fixed_sh[t] != 0)
        atomicAdd(acc + t, fixed_sh[t]);
  }
}

// out + the target's exact sum q * 2^-shift, rounded once; a special mask (NaN, infinities)
// replaces the sum. Shared by the three kernels and the one block, so both give the same bits.
__device__ __forceinline__ float finished_target(float o, long long q, unsigned mk, int shift) {
  if (mk != 0)
    return o + special_value<float>(mk);
  return static_cast<float>(static_cast<double>(o) + scale_pow2(static_cast<double>(q), -shift));
}

__global__ void fixed_finish_kernel(Geo4 g, std::int64_t n, float* out,
                                    const unsigned long long* acc, const unsigned* mask,
                                    const CheckResult* res) {
  int shift = 0;
  if (!checked_shift(res, n, shift))
    return;
  if (res->special == 0)
    mask = nullptr;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       t < g.out_numel; t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const auto q = static_cast<long long>(acc[t]);
    const unsigned mk = mask != nullptr ? mask[t] : 0u;
    if (q == 0 && mk == 0)
      continue;
    float& o = out[offset_of(t, g.out_size, g.out_st, g.nd)];
    o = finished_target(o, q, mk, shift);
  }
}

// A batch as the sums need it: each site's target as out's element number and its source value.
// Once the check has passed, every target is below kFixedOneBlockMaxTargets (an int); before that
// (the cluster computes it first) a bad index gives a meaningless one that no sum uses, computed
// in unsigned arithmetic so that no index value overflows. Smaller than SiteBatch, so that it
// stays in registers across the cluster's syncs.
template <int N> struct SummedSites {
  int target[N];
  float v[N];
};

template <int N>
__device__ __forceinline__ SummedSites<N> summed_sites(const FixedSites& s, const SiteBatch<N>& b) {
  SummedSites<N> r;
#pragma unroll
  for (int u = 0; u < N; ++u) {
    r.target[u] = static_cast<int>(static_cast<std::uint64_t>(b.target[u]) +
                                   static_cast<std::uint64_t>(b.index[u]) *
                                       static_cast<std::uint64_t>(s.target_mult));
    r.v[u] = b.v[u];
  }
  return r;
}

// A batch's integer sums into a block's shared `acc` (the non-finite ones' bits into its byte
// masks).
template <int N>
__device__ __forceinline__ void
add_site_batch(const FixedSites& s, const SummedSites<N>& b, std::int64_t e0, std::int64_t step,
               float alpha, bool scaled, int shift, unsigned long long* acc, unsigned* mask) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if (e0 + u * step >= s.g.numel)
      break;
    const int t = b.target[u];
    const double c = contribution(b.v[u], alpha, scaled);
    if (!isfinite(c)) {
      atomicOr(mask + t / 4, special_bit(c) << (8 * (t % 4)));
      continue;
    }
    const auto q = static_cast<unsigned long long>(__double2ll_rn(scale_pow2(c, shift)));
    if (q != 0)
      atomicAdd(acc + t, q);
  }
}

// The integer sums of one block's share of the sites (first, first + step, ...) into its shared
// `acc` (and the non-finite ones' bits into its byte masks), the batch's loads before its adds.
__device__ __forceinline__ void sum_sites_shared(const FixedSites& s, const float* src,
                                                 const void* idx, bool is64, float alpha,
                                                 bool scaled, int shift, std::int64_t first,
                                                 std::int64_t step, unsigned long long* acc,
                                                 unsigned* mask) {
  for (std::int64_t e0 = first; e0 < s.g.numel; e0 += step * kSiteBatch) {
    SiteBatch<> b;
    load_site_batch(s, src, idx, is64, e0, step, b);
    add_site_batch(s, summed_sites(s, b), e0, step, alpha, scaled, shift, acc, mask);
  }
}

// A one-launch block's start: no bad index and no max found yet, every sum and mask zero.
__device__ __forceinline__ void clear_block_sums(CheckResult& r, unsigned long long* acc,
                                                 unsigned* mask, std::int64_t targets) {
  if (threadIdx.x == 0)
    r = CheckResult{ULLONG_MAX, 0, 0, 0};
  for (std::int64_t t = threadIdx.x; t < targets; t += blockDim.x)
    acc[t] = 0;
  for (std::int64_t w = threadIdx.x; w < (targets + 3) / 4; w += blockDim.x)
    mask[w] = 0;
  __syncthreads();
}

__device__ __forceinline__ unsigned mask_byte(const unsigned* mask, std::int64_t t) {
  return (mask[t / 4] >> (8 * (t % 4))) & 0xffu;
}

// The end of a one-launch call: the check's result for the host's wait, or a deferred report.
__device__ __forceinline__ void publish_one_launch(const CheckResult& r, CheckResult* res,
                                                   const DeferredSink& sink,
                                                   const DeferredIndex& at) {
  if (sink.record == nullptr)
    *res = r;
  else if (r.first_bad != ULLONG_MAX)
    report_to_sink(sink, 0, r.first_bad, deferred_index_value(at, r.first_bad));
}

// Small calls (ops/scatter_choice.hpp: fixed_point_one_block): the three passes above in one
// block, the sums and masks in shared memory, one launch and no memset. The same check, shift,
// integers and finishing formula, so the same bits as the three kernels. In deferred mode it
// reports a bad index itself (`sink`): no report kernel after it.
__global__ void __launch_bounds__(kFixedOneBlockThreads)
    fixed_one_block_kernel(FixedSites s, const float* src, const void* idx, bool is64, float alpha,
                           bool scaled, float* out, CheckResult* res, DeferredSink sink,
                           DeferredIndex at) {
  __shared__ CheckResult r;
  __shared__ unsigned long long acc[kFixedOneBlockMaxTargets];
  __shared__ unsigned mask[kFixedOneBlockMaxTargets / 4]; // a byte per target (special_bit < 8)
  const std::int64_t n = s.g.numel, targets = s.g.out_numel;
  clear_block_sums(r, acc, mask, targets);
  check_sites(s, src, idx, is64, alpha, scaled, threadIdx.x, blockDim.x, &r);
  __syncthreads();
  int shift = 0;
  if (checked_shift(&r, n, shift)) { // the same answer in every thread
    sum_sites_shared(s, src, idx, is64, alpha, scaled, shift, threadIdx.x, blockDim.x, acc, mask);
    __syncthreads();
    for (std::int64_t t = threadIdx.x; t < targets; t += blockDim.x) {
      const auto q = static_cast<long long>(acc[t]);
      const unsigned mk = r.special != 0 ? mask_byte(mask, t) : 0u;
      if (q == 0 && mk == 0)
        continue;
      float& o = out[offset_of(t, s.g.out_size, s.g.out_st, s.g.nd)];
      o = finished_target(o, q, mk, shift);
    }
  }
  if (threadIdx.x == 0)
    publish_one_launch(r, res, sink, at);
}

// The combined check of a cluster's blocks (min, max and or of their `mine`), for every thread of
// the calling block: warp 0's lane k reads block k's through distributed shared memory, all
// blocks' reads in flight together, and the warp combines them.
// (A template: cooperative_groups::cluster_group exists only in code for sm_90 and later.)
template <class Cluster>
__device__ __forceinline__ void combine_cluster_checks(const Cluster& cl, CheckResult& mine,
                                                       CheckResult& all) {
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    CheckResult c{ULLONG_MAX, 0, 0, 0};
    if (lane < cl.num_blocks())
      c = *cl.map_shared_rank(&mine, lane);
    for (int o = 16; o > 0; o >>= 1) {
      c.first_bad = min(c.first_bad, __shfl_xor_sync(0xffffffffu, c.first_bad, o));
      c.max_bits = max(c.max_bits, __shfl_xor_sync(0xffffffffu, c.max_bits, o));
      c.special |= __shfl_xor_sync(0xffffffffu, c.special, o);
    }
    if (lane == 0)
      all = c;
  }
  __syncthreads();
}

// The same launch over a cluster of blocks (compute capability 9 and later; ops/scatter_choice.hpp:
// fixed_point_blocks), for the calls one block's threads take too long over (a GCNConv degree
// count on Cora: 13264 sites, 25 us in one block). Block k checks and sums the sites k * threads +
// i (i < threads), then steps of the cluster's threads, into its own shared memory; the blocks
// then combine their checks (min, max and or) and block k finishes the targets k * threads + i,
// then steps, from the sums of every block, read through distributed shared memory. The integers
// add in any order, so the bits are those of one block. Kept (chosen in run_fixed_point: rows,
// and at most kKeptSites sites a thread): the sums come from the registers the check loaded, not
// from a second load. (A kernel of its own: with the general path beside it, the loaded values
// spilled.)
template <bool Kept>
__global__ void __launch_bounds__(kFixedOneBlockThreads)
    fixed_cluster_kernel(FixedSites s, const float* src, const void* idx, bool is64, float alpha,
                         bool scaled, float* out, CheckResult* res, DeferredSink sink,
                         DeferredIndex at) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  __shared__ CheckResult mine, all;
  __shared__ unsigned long long acc[kFixedOneBlockMaxTargets];
  __shared__ unsigned mask[kFixedOneBlockMaxTargets / 4];
  const std::int64_t n = s.g.numel, targets = s.g.out_numel;
  const std::int64_t first = std::int64_t{rank} * blockDim.x + threadIdx.x,
                     step = std::int64_t{blocks} * blockDim.x;
  SiteBatch<kKeptSites> loaded;
  if constexpr (Kept) // in flight while the sums clear
    load_site_batch<true>(s, src, idx, is64, first, step, loaded);
  clear_block_sums(mine, acc, mask, targets);
  SummedSites<kKeptSites> kept; // only these stay live across the syncs
  if constexpr (Kept) {
    SiteCheck c;
    check_site_batch(s, loaded, first, step, alpha, scaled, c);
    kept = summed_sites(s, loaded);
    publish_check(c.bad, c.mx, c.sp, &mine);
  } else {
    check_sites(s, src, idx, is64, alpha, scaled, first, step, &mine);
  }
  cluster.sync(); // every block's check is in
  combine_cluster_checks(cluster, mine, all);
  int shift = 0;
  const bool ok = checked_shift(&all, n, shift); // the same answer in every block
  if constexpr (Kept) {
    if (ok)
      add_site_batch(s, kept, first, step, alpha, scaled, shift, acc, mask);
  } else if (ok) {
    sum_sites_shared(s, src, idx, is64, alpha, scaled, shift, first, step, acc, mask);
  }
  cluster.sync(); // every block's sums are in
  if (ok)
    for (std::int64_t t = first; t < targets; t += step) {
      float& o = out[offset_of(t, s.g.out_size, s.g.out_st, s.g.nd)];
      const float before = o;
      unsigned long long part[kFixedClusterBlocks]; // every block's sum in flight together
#pragma unroll
      for (int k = 0; k < kFixedClusterBlocks; ++k)
        part[k] = static_cast<unsigned>(k) < blocks ? cluster.map_shared_rank(acc, k)[t] : 0;
      unsigned long long q = 0;
#pragma unroll
      for (int k = 0; k < kFixedClusterBlocks; ++k)
        q += part[k];
      unsigned mk = 0;
      if (all.special != 0)
        for (unsigned k = 0; k < blocks; ++k)
          mk |= mask_byte(cluster.map_shared_rank(mask, k), t);
      if (q == 0 && mk == 0)
        continue;
      o = finished_target(before, static_cast<long long>(q), mk, shift);
    }
  cluster.sync(); // no block leaves while another reads its shared memory
  if (rank == 0 && threadIdx.x == 0)
    publish_one_launch(all, res, sink, at);
#else
  __trap(); // never launched from code older than sm_90 (cluster_kernel_runs)
#endif
}

// The launch of fixed_cluster_kernel over `blocks` blocks on `stream` (the caller sets the
// arguments).
cudaLaunchConfig_t cluster_launch(int blocks, cudaStream_t stream, cudaLaunchAttribute& cluster) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(kFixedOneBlockThreads);
  cfg.stream = stream;
  cluster = cudaLaunchAttribute{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(blocks);
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cfg.attrs = &cluster;
  cfg.numAttrs = 1;
  return cfg;
}

// Whether both fixed_cluster_kernel instances can run their clusters on the current device: the
// binary holds their sm_90 code (one that only has PTX of an older architecture for it, a build for
// sm_80 alone run on an H100, gets the trapping body), and a cluster of kFixedClusterBlocks blocks
// of its size fits (not where a context has too few multiprocessors). Otherwise the one block runs.
// Asked once per device.
bool cluster_kernel_runs() {
  static std::array<std::atomic<int>, 64> known{}; // 0 unknown, 1 no, 2 yes
  int device = 0;
  SAMEBITS_CUDA_CHECK(cudaGetDevice(&device));
  auto runs = [](auto kernel) {
    cudaFuncAttributes attr{};
    SAMEBITS_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    if (attr.ptxVersion < 90)
      return false;
    cudaLaunchAttribute cluster{};
    const cudaLaunchConfig_t cfg = cluster_launch(kFixedClusterBlocks, nullptr, cluster);
    int fit = 0;
    if (cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg) != cudaSuccess) {
      (void)cudaGetLastError(); // not a sticky error: the one block runs
      return false;
    }
    return fit > 0;
  };
  auto ask = [&] {
    return runs(fixed_cluster_kernel<false>) && runs(fixed_cluster_kernel<true>) ? 2 : 1;
  };
  if (device < 0 || static_cast<std::size_t>(device) >= known.size())
    return ask() == 2;
  auto& k = known[static_cast<std::size_t>(device)];
  if (k.load(std::memory_order_relaxed) == 0)
    k.store(ask(), std::memory_order_relaxed);
  return k.load(std::memory_order_relaxed) == 2;
}

// Where the fixed point is faster than the sort and pull (H200): rows of at most 4 features, and
// at most 2^21 output elements, so that the int64 sums stay in L2 (bench/BASELINE.md, the
// index_add E=10M N=1M F=1 row; past 2^21: docs/decisions.md, fixed-point sums). Constants, not
// device queries: a shape takes the same variant on every GPU.
constexpr int kFixedMaxFeatures = 4;
constexpr std::int64_t kFixedMaxTargets = std::int64_t{1} << 21;
constexpr std::size_t kFixedSmemBytes = 48 * 1024; // per-block sums in shared memory up to here

std::string fixed_why_not(const ScatterArgs& a) {
  if (a.src.dtype != DType::f32)
    return "float32 only (an int64 fixed point is coarser than a float64 sum for small targets)";
  // Decided from the logical shape, never from strides: one index value per row along dim 0
  // (index_add, or scatter_add with an index expanded over the features) makes rows of F features.
  bool vector_index = a.dim == 0;
  if (a.plan == nullptr)
    for (int j = 1; j < a.index.ndim && vector_index; ++j)
      vector_index = a.index.size(j) == 1 || a.index.stride(j) == 0;
  const std::int64_t rows = a.src.ndim > 0 ? a.src.size(0) : 0;
  if (vector_index && rows > 0 && a.src.numel() / rows > kFixedMaxFeatures)
    return "rows of more than 4 features (the sort and pull is faster there)";
  // (Rows that are not contiguous then take the sort's general path, with a wait: a shape
  // decides, never the strides.)
  if (vector_index && fixed_point_yields_to_short_sort(rows, a.out.ndim > 0 ? a.out.size(0) : 1,
                                                       rows > 0 ? a.src.numel() / rows : 1))
    return "a short index into more rows than one block sums (the kept one-block sort and the "
           "pull take two launches, the fixed point five calls)";
  if (a.out.numel() > kFixedMaxTargets)
    return "more than 2^21 output elements (the int64 sums would not stay in L2; the sort and pull "
           "is faster)";
  return "";
}

// The three kernels for a call too large for one block: check, integer sums, finish.
void run_fixed_kernels(const ScatterArgs& a, const FixedSites& s, const float* src, bool is64,
                       float alpha, bool scaled, CheckResult* res, DeviceScratch& scratch,
                       cudaStream_t stream) {
  const std::int64_t targets = s.g.out_numel;
  auto* acc = scratch.take<unsigned long long>(targets);
  auto* mask = scratch.take<unsigned>(targets);
  const int block = scatter_block();
  const unsigned sms = static_cast<unsigned>(sm_count());

  // 1. Indices and max |c|. The next kernels read the result on the device: a bad index makes
  // them write nothing, and the host learns of it once, at the end (one wait per call).
  // The result, the sums and the mask lie in that order in one scratch buffer: one memset zeroes
  // them all (gaps included), one more sets the first bad position to none. Two host calls a call
  // fewer than a memset each.
  const auto zeroed = static_cast<std::size_t>(reinterpret_cast<const char*>(mask + targets) -
                                               reinterpret_cast<const char*>(res));
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(res, 0, zeroed, stream));
  SAMEBITS_CUDA_CHECK(cudaMemsetAsync(&res->first_bad, 0xff, sizeof(unsigned long long), stream));
  fixed_check_kernel<<<std::min(grid_for(s.g.numel, block), sms * 16u), block, 0, stream>>>(
      s, src, a.index.data, is64, alpha, scaled, res);
  SAMEBITS_CUDA_CHECK_LAUNCH("fixed_check_kernel");

  // 2. Exact integer sums (into acc and mask, zeroed above).
  const bool smem = static_cast<std::size_t>(targets) * 8 <= kFixedSmemBytes;
  const unsigned add_grid = std::min(grid_for(s.g.numel, block), smem ? sms * 2u : 1u << 20);
  fixed_add_kernel<<<add_grid, block, smem ? static_cast<std::size_t>(targets) * 8 : 0, stream>>>(
      s, src, a.index.data, is64, alpha, scaled, res, acc, mask, smem);
  SAMEBITS_CUDA_CHECK_LAUNCH("fixed_add_kernel");

  // 3. out + sum, once per target.
  fixed_finish_kernel<<<std::min<unsigned>(grid_for(targets, block), 1u << 20), block, 0, stream>>>(
      s.g, s.g.numel, static_cast<float*>(a.out.data), acc, mask, res);
  SAMEBITS_CUDA_CHECK_LAUNCH("fixed_finish_kernel");
}

void run_fixed_point(const ScatterArgs& a, const Workspace& ws) {
  raise_deferred_index_error();
  cudaStream_t stream = SAMEBITS_STREAM(ws.stream);
  FixedSites s;
  s.g = geo4(a);
  if (s.g.numel == 0)
    return;
  for (int j = s.g.nd - 2; j >= 0; --j)
    s.out_mult[j] = s.out_mult[j + 1] * s.g.out_size[j + 1];
  s.target_mult = s.out_mult[s.g.d];
  const Rows rw = rows_of(a);
  if (rw.ok) {
    s.rows = true;
    s.F = rw.F;
    s.src_row = rw.src_row;
    s.istride = a.index.stride(0);
  }
  const std::int64_t targets = s.g.out_numel;
  const bool one_block = fixed_point_one_block(s.g.numel, targets);
  const bool defer = defer_index_checks();
  // The one block reports a deferred error itself and needs no scratch then: no allocation.
  const bool no_scratch = one_block && defer;
  DeviceScratch scratch(
      no_scratch ? 0 : 3 * 256 + (one_block ? 0 : static_cast<std::size_t>(targets) * 12),
      a.out.device, Stream{stream});
  auto* res = no_scratch ? nullptr : scratch.take<CheckResult>(1);
  const auto* src = static_cast<const float*>(a.src.data);
  const bool is64 = a.index.dtype == DType::i64;
  const auto alpha = static_cast<float>(a.alpha);
  const bool scaled = a.alpha != 1.0;
  const DeferredIndex at =
      rw.ok ? DeferredIndex{a.index.data, is64, a.index.stride(0)} : DeferredIndex{};
  if (one_block) { // writes *res (or reports) itself: no memset, no report kernel
    const DeferredSink sink =
        defer ? deferred_sink(deferred_scatter_message(a.op, s.g.M, rw.ok)) : DeferredSink{};
    auto* out = static_cast<float*>(a.out.data);
    const int blocks = cluster_kernel_runs() ? fixed_point_blocks(s.g.numel, compute_major()) : 1;
    if (blocks == 1) {
      fixed_one_block_kernel<<<1, kFixedOneBlockThreads, 0, stream>>>(
          s, src, a.index.data, is64, alpha, scaled, out, res, sink, at);
      SAMEBITS_CUDA_CHECK_LAUNCH("fixed_one_block_kernel");
    } else {
      cudaLaunchAttribute cluster{};
      const cudaLaunchConfig_t cfg = cluster_launch(blocks, stream, cluster);
      // Rows of at most kKeptSites sites a thread: the kernel that keeps them in registers.
      const bool kept =
          s.rows && s.g.numel <= std::int64_t{blocks} * kFixedOneBlockThreads * kKeptSites;
      SAMEBITS_CUDA_CHECK(cudaLaunchKernelEx(
          &cfg, kept ? fixed_cluster_kernel<true> : fixed_cluster_kernel<false>, s, src,
          static_cast<const void*>(a.index.data), is64, alpha, scaled, out, res, sink, at));
      SAMEBITS_CUDA_CHECK_LAUNCH("fixed_cluster_kernel");
    }
    if (defer)
      return;
  } else {
    run_fixed_kernels(a, s, src, is64, alpha, scaled, res, scratch, stream);
    if (defer) {
      defer_index_error(&res->first_bad, 1, at, DeferredIndex{},
                        deferred_scatter_message(a.op, s.g.M, rw.ok), stream);
      return;
    }
  }
  CheckResult h{};
  SAMEBITS_CUDA_CHECK(cudaMemcpyAsync(&h, res, sizeof h, cudaMemcpyDeviceToHost, stream));
  SAMEBITS_CUDA_CHECK(cudaStreamSynchronize(stream)); // also: scratch is freed on return
  if (h.first_bad != ULLONG_MAX)
    throw_bad_index(a, static_cast<std::int64_t>(h.first_bad), rw.ok ? vector_geo(a, s.g) : s.g);
}

} // namespace

Variant<ScatterArgs> fixed_point_variant(const char* op) {
  const char* how =
      "float32 sums as exact int64 fixed point with integer atomics, scale from max |c|, no sort "
      "(rows of <= 4 features, <= 2^21 outputs; otherwise the sort)";
  return {{op, "cuda.fixed_point", DeviceType::cuda, Determinism::run_to_run, how},
          fixed_why_not,
          nullptr,
          run_fixed_point};
}

} // namespace samebits::detail

// CUDA variants of gemm (canonical order: include/samebits/ops/gemm.hpp).
//
//   cuda.split_k_atomic  not_guaranteed  k cut into chunks (grid z); c = beta * c first, then each
//                                        chunk's alpha * partial is added with atomicAdd, in
//                                        whatever order the blocks finish
//   cuda.cublas          run_to_run      cublasSgemm/Dgemm on a handle owned by (device, stream)
//                                        with its own fixed workspace, atomics not allowed and
//                                        CUBLAS_DEFAULT_MATH (no TF32)
//   cuda.tiled           portable        shared-memory tiles; each thread owns output elements and
//                                        walks k ascending with __fmul_rn/__fadd_rn, so every tile
//                                        shape gives the CPU's bits (at most 1024 outputs with
//                                        k >= 1024: a warp per output, the same chain; few output
//                                        tiles with a long k: gemm_long_k, a thread per output;
//                                        many rows and at most 32 columns: gemm_thin)
//
// Why cuda.cublas is run_to_run under concurrent streams: cuBLAS gives the same bits for the same
// call, handle configuration and GPU; what changes results between otherwise equal calls is the
// kernel (and split) its heuristics pick, which depends on the workspace it is given. A handle
// shared by several streams falls back to a shared default workspace pool whose availability
// varies with what the other streams run (CUBLAS_WORKSPACE_CONFIG exists for this). Here every
// (device, stream) pair has its own handle, bound once to that stream and to its own workspace
// of a fixed size, so a call sees the same configuration whatever runs elsewhere; and calls on
// one stream are ordered, so they never use the workspace at the same time.
#include "core/memory.hpp"
#include "core/registry.hpp"
#include "cuda/check.cuh"
#include "cuda/register.hpp"
#include "cuda/vec16.cuh"
#include "ops/gemm.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cublas_v2.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

namespace samebits::detail {

namespace {

using i64 = std::int64_t;

// N adjacent elements of c at e (16-byte aligned) set to epi(acc[j], e[j]), with 16-byte loads
// (only when beta reads c) and stores.
template <class T, int N>
__device__ __forceinline__ void store_through16(T* e, const T (&acc)[N], const Epilogue<T>& epi) {
  T old[N], val[N];
  if (epi.beta != T(0))
    load16(e, old);
#pragma unroll
  for (int j = 0; j < N; ++j)
    val[j] = epi(acc[j], &old[j]);
  store16(e, val);
}

// --- the tiled kernel (portable, and split-K when gridDim.z > 1 with atomic adds) ---------------

// Tile shapes: BM x BN outputs per block of (BM/TM) x (BN/TN) threads, k in steps of BK.
// Wide: large outputs (register-blocked 8x8 per thread). Narrow: thin outputs with short k.
// Deep: few output tiles and long k (weight gradients) cut into chunks of k by split-K: more
// blocks, and 128-deep k steps loaded one step ahead so each thread has global loads in flight
// while it computes (without split-K such products take gemm_long_k).
// PF: the next k step's tiles are loaded into registers while this step is computed (the deep
// tiles' long k walk would otherwise wait for global memory at every step).
// CONTIG: a thread's TM rows and TN columns are adjacent, so it reads them from shared memory,
// and writes its rows of c, 16 bytes at a time (else they are RY and RX apart, one element each).
// The float wide tiles also load the next k step ahead (PF), 16 k deep, into two buffers, 16 bytes
// at a time where they can (DB, VEC); the double ones stay element-wise (16-byte loads made them
// slower on an H200).
// DB: two shared-memory buffers, so that a k step is stashed while the other is read (one
// barrier per step instead of two). VEC: 16-byte global loads of whole tiles when A's rows run
// along k and B's along n, aligned, and the tile lies inside the matrices.
struct WideTiles {
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  static constexpr bool PF = false, CONTIG = false, DB = false, VEC = false;
};
struct WideFloatTiles {
  static constexpr int BM = 128, BN = 128, BK = 16, TM = 8, TN = 8;
  static constexpr bool PF = true, CONTIG = true, DB = true, VEC = true;
};
struct NarrowTiles {
  static constexpr int BM = 32, BN = 16, BK = 16, TM = 2, TN = 1;
  static constexpr bool PF = false, CONTIG = false, DB = false, VEC = false;
};
struct DeepTiles {
  static constexpr int BM = 16, BN = 16, BK = 128, TM = 1, TN = 1;
  static constexpr bool PF = true, CONTIG = false, DB = false, VEC = false;
};

template <class Cfg> constexpr int kThreads = (Cfg::BM / Cfg::TM) * (Cfg::BN / Cfg::TN);

// Block (x, y, z) computes rows [x*BM, +BM) x columns [y*BN, +BN) over k in [z*k_chunk, +k_chunk).
// Tiles past m, n or the chunk's end are filled with +0: a +0 product added to an accumulator that
// is never -0 leaves it unchanged, and rows/columns past m/n are not written.
// One block per SM as the launch bound: the compiler may then keep the wide tiles' 8 x 8
// accumulators, operands and next k step in registers (255 for float, no spills) instead of
// aiming at more blocks with fewer and a longer instruction stream (docs/decisions.md, GEMM: wide
// tiles at two blocks per SM; bench/BASELINE.md, the gemm 4096^3 f32 row).
template <class T, class Cfg>
__global__ void __launch_bounds__(kThreads<Cfg>, 1)
    gemm_tiles(Mat<T> A, Mat<T> B, T* c, i64 crs, i64 ccs, i64 m, i64 n, i64 k, i64 k_chunk,
               Epilogue<T> epi, bool atomic) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int NT = kThreads<Cfg>, RY = BM / TM, RX = BN / TN;
  constexpr bool CONTIG = Cfg::CONTIG;
  constexpr int NB = Cfg::DB ? 2 : 1;
  static_assert(!Cfg::DB || Cfg::PF, "two buffers go with the next step loaded ahead");
  // (BK, BM): the padding spreads the k-fast stores over the banks (4 keeps 16-byte alignment)
  constexpr int PAD = CONTIG ? 4 : 1;
  __shared__ __align__(16) T As[NB][BK][BM + PAD];
  __shared__ __align__(16) T Bs[NB][BK][BN]; // (BK, BN)
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % RX, ty = tid / RX;
  const i64 row0 = static_cast<i64>(blockIdx.x) * BM, col0 = static_cast<i64>(blockIdx.y) * BN;
  const i64 kb = static_cast<i64>(blockIdx.z) * k_chunk;
  const i64 ke = kb + k_chunk < k ? kb + k_chunk : k;
  const bool a_k_fast = A.cs == 1, b_n_fast = B.cs == 1; // which index is contiguous in memory
  constexpr int W = kPerVec16<T>;
  // Whole tiles by 16-byte loads: every k step that lies inside the chunk, in a block whose tile
  // lies inside m and n (the others take the element-wise path below).
  const bool vec_block = Cfg::VEC && a_k_fast && b_n_fast && A.rs % W == 0 && B.rs % W == 0 &&
                         kb % W == 0 && aligned16(A.data) && aligned16(B.data) && row0 + BM <= m &&
                         col0 + BN <= n;

  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = T(0);

  // Element l of this thread's share of a k step's A and B tiles: position in the tile and value.
  constexpr int LA = (BM * BK + NT - 1) / NT, LB = (BK * BN + NT - 1) / NT;
  auto a_at = [&](int idx, int& r, int& kk) {
    r = a_k_fast ? idx / BK : idx % BM;
    kk = a_k_fast ? idx % BK : idx / BM;
  };
  auto b_at = [&](int idx, int& cc, int& kk) {
    cc = b_n_fast ? idx % BN : idx / BK;
    kk = b_n_fast ? idx / BN : idx % BK;
  };
  // With 16-byte loads, vector l of this thread (W elements) starts at row r, k kk of A's tile
  // and at k kk, column cc of B's.
  constexpr int VA = Cfg::VEC ? BM * BK / W / NT : 1, VB = Cfg::VEC ? BK * BN / W / NT : 1;
  static_assert(!Cfg::VEC || (VA * W == LA && VB * W == LB && BM * BK % (W * NT) == 0 &&
                              BK * BN % (W * NT) == 0),
                "16-byte tile loads need whole vectors per thread");
  auto a_vec_at = [&](int l, int& r, int& kk) {
    const int v = tid + l * NT;
    r = v / (BK / W);
    kk = v % (BK / W) * W;
  };
  auto b_vec_at = [&](int l, int& cc, int& kk) {
    const int v = tid + l * NT;
    kk = v / (BN / W);
    cc = v % (BN / W) * W;
  };
  // A k step's tiles go global -> registers (fetch) -> shared memory (stash). Without PF the
  // fetch of a step comes right before its stash; with PF it is issued one step early, so its
  // loads are in flight while the previous step is computed.
  T pa[LA], pb[LB];
  bool fetched_vec = false;
  // `count` (an integral constant) 16-byte vectors into `to`, vector l from address(l).
  auto load_vectors = [&](auto count, T* to, auto address) {
#pragma unroll
    for (int l = 0; l < decltype(count)::value; ++l) {
      T v[W];
      load16(address(l), v);
#pragma unroll
      for (int q = 0; q < W; ++q)
        to[l * W + q] = v[q];
    }
  };
  // `count` elements into `to`, element l from element(idx) with idx its place in the tile; +0
  // where element says it lies outside.
  auto load_elements = [&](auto count, T* to, auto element) {
#pragma unroll
    for (int l = 0; l < decltype(count)::value; ++l)
      to[l] = element(tid + l * NT);
  };
  auto fetch = [&](i64 k0) {
    fetched_vec = vec_block && k0 + BK <= ke;
    if constexpr (Cfg::VEC) {
      if (fetched_vec) {
        load_vectors(std::integral_constant<int, VA>{}, pa, [&](int l) {
          int r, kk;
          a_vec_at(l, r, kk);
          return A.data + (row0 + r) * A.rs + k0 + kk;
        });
        load_vectors(std::integral_constant<int, VB>{}, pb, [&](int l) {
          int cc, kk;
          b_vec_at(l, cc, kk);
          return B.data + (k0 + kk) * B.rs + col0 + cc;
        });
        return;
      }
    }
    load_elements(std::integral_constant<int, LA>{}, pa, [&](int idx) {
      int r, kk;
      a_at(idx, r, kk);
      const i64 gr = row0 + r, gk = k0 + kk;
      return (idx < BM * BK && gr < m && gk < ke) ? A.data[gr * A.rs + gk * A.cs] : T(0);
    });
    load_elements(std::integral_constant<int, LB>{}, pb, [&](int idx) {
      int cc, kk;
      b_at(idx, cc, kk);
      const i64 gk = k0 + kk, gc = col0 + cc;
      return (idx < BK * BN && gk < ke && gc < n) ? B.data[gk * B.rs + gc * B.cs] : T(0);
    });
  };
  auto stash = [&](int buf) {
    if constexpr (Cfg::VEC) {
      if (fetched_vec) {
#pragma unroll
        for (int l = 0; l < VA; ++l) {
          int r, kk;
          a_vec_at(l, r, kk);
#pragma unroll
          for (int q = 0; q < W; ++q)
            As[buf][kk + q][r] = pa[l * W + q];
        }
#pragma unroll
        for (int l = 0; l < VB; ++l) {
          int cc, kk;
          b_vec_at(l, cc, kk);
          T v[W];
#pragma unroll
          for (int q = 0; q < W; ++q)
            v[q] = pb[l * W + q];
          store16(&Bs[buf][kk][cc], v);
        }
        return;
      }
    }
#pragma unroll
    for (int l = 0; l < LA; ++l) {
      int r, kk;
      a_at(tid + l * NT, r, kk);
      if (tid + l * NT < BM * BK)
        As[buf][kk][r] = pa[l];
    }
#pragma unroll
    for (int l = 0; l < LB; ++l) {
      int cc, kk;
      b_at(tid + l * NT, cc, kk);
      if (tid + l * NT < BK * BN)
        Bs[buf][kk][cc] = pb[l];
    }
  };
  // The products of one k step from buffer buf, each output's chain in ascending k.
  auto compute = [&](int buf) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      T ra[TM], rb[TN];
      if constexpr (CONTIG) {
        load16(&As[buf][kk][ty * TM], ra);
        load16(&Bs[buf][kk][tx * TN], rb);
      } else {
#pragma unroll
        for (int i = 0; i < TM; ++i)
          ra[i] = As[buf][kk][ty + i * RY];
#pragma unroll
        for (int j = 0; j < TN; ++j)
          rb[j] = Bs[buf][kk][tx + j * RX];
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = rn_add(acc[i][j], rn_mul(ra[i], rb[j]));
    }
  };
  if constexpr (Cfg::DB) {
    // Step s is read from buffer s % 2 while step s + 1 is loaded and then stashed into the other;
    // the barrier after each step makes the stash visible and frees the buffer just read.
    if (kb < ke) {
      fetch(kb);
      stash(0);
    }
    __syncthreads();
    int buf = 0;
    for (i64 k0 = kb; k0 < ke; k0 += BK) {
      const bool more = k0 + BK < ke;
      if (more)
        fetch(k0 + BK);
      compute(buf);
      if (more)
        stash(buf ^ 1);
      __syncthreads();
      buf ^= 1;
    }
  } else {
    if (Cfg::PF && kb < ke)
      fetch(kb);
    for (i64 k0 = kb; k0 < ke; k0 += BK) {
      if (!Cfg::PF)
        fetch(k0);
      stash(0);
      __syncthreads();
      if (Cfg::PF && k0 + BK < ke)
        fetch(k0 + BK);
      compute(0);
      __syncthreads();
    }
  }

  if constexpr (CONTIG) {
    const i64 col = col0 + tx * TN;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const i64 r = row0 + ty * TM + i;
      if (r >= m)
        continue;
      T* e = c + r * crs + col * ccs;
      if (!atomic && ccs == 1 && col + TN <= n && aligned16(e)) {
        store_through16(e, acc[i], epi);
        continue;
      }
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        if (col + j >= n)
          continue;
        T* ej = e + j * ccs;
        if (atomic)
          atomicAdd(ej, epi.alpha == T(1) ? acc[i][j] : rn_mul(epi.alpha, acc[i][j]));
        else
          *ej = epi(acc[i][j], ej);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const i64 r = row0 + ty + i * RY, col = col0 + tx + j * RX;
        if (r >= m || col >= n)
          continue;
        T* e = c + r * crs + col * ccs;
        if (atomic)
          atomicAdd(e, epi.alpha == T(1) ? acc[i][j] : rn_mul(epi.alpha, acc[i][j]));
        else
          *e = epi(acc[i][j], e);
      }
  }
}

// One element from global to shared memory (shared address `to`), asynchronously: the copy
// __pipeline_memcpy_async makes, without its conversion of a generic address per call.
template <class T> __device__ __forceinline__ void copy_async(unsigned to, const T* from) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(to), "l"(from), "n"(sizeof(T)));
#else
  __pipeline_memcpy_async(__cvta_shared_to_generic(to), from, sizeof(T));
#endif
}

// Few outputs with a long k at portable (weight gradients such as h^T @ dO over a million rows):
// the chains cannot be split along k, so all the parallelism is in the outputs. One output per
// thread and 8 x 16 outputs per block, so that even 128 x 128 outputs spread over 128 SMs; k in
// steps of 256 bytes kept in shared memory along k ([row][k] and [col][k]), so that a thread reads
// the next 16 bytes of k of its a and its b with one load each. kLongStages - 1 steps are in
// flight at once (asynchronous copies into a ring of buffers), so that the few warps of an SM
// rarely wait for global memory. Elements past m, n or k are +0 on both sides, so they add +0 to
// chains that are never -0 (see gemm_tiles).
constexpr int kLongRows = 8, kLongCols = 16, kLongStages = 4;
constexpr int kLongThreads = kLongRows * kLongCols;
template <class T>
__global__ void __launch_bounds__(kLongThreads)
    gemm_long_k(Mat<T> A, Mat<T> B, T* c, i64 crs, i64 ccs, i64 m, i64 n, i64 k, Epilogue<T> epi) {
  constexpr int R = kLongRows, C = kLongCols, NS = kLongStages, NT = kLongThreads, W = kPerVec16<T>;
  constexpr int S = 256 / static_cast<int>(sizeof(T)); // k per step
  constexpr int LA = R * S / NT, LB = C * S / NT;
  __shared__ __align__(16) T As[NS][R][S + W]; // + W: rows 16-byte aligned, spread over the banks
  __shared__ __align__(16) T Bs[NS][C][S + W];
  const int tid = static_cast<int>(threadIdx.x), tx = tid % C, ty = tid / C;
  const i64 row0 = static_cast<i64>(blockIdx.x) * R, col0 = static_cast<i64>(blockIdx.y) * C;
  const bool a_k_fast = A.cs == 1, b_n_fast = B.cs == 1; // neighbours in memory run along k / n
  // Element l of this thread's share of a step: consecutive threads take neighbours in memory.
  auto a_at = [&](int l, int& r, int& kk) {
    const int idx = tid + l * NT;
    r = a_k_fast ? idx / S : idx % R;
    kk = a_k_fast ? idx % S : idx / R;
  };
  auto b_at = [&](int l, int& cc, int& kk) {
    const int idx = tid + l * NT;
    cc = b_n_fast ? idx % C : idx / S;
    kk = b_n_fast ? idx / C : idx % S;
  };
  const i64 steps = (k + S - 1) / S;
  // Step t into buffer t % NS: asynchronous copies of the elements inside the matrices, +0 stored
  // for the others; one commit per step, also for steps past the end (the wait counts groups).
  // In a block inside m and n, every step but a last partial one copies all its elements: their
  // sources and places are worked out once, and such a step costs an add and a copy per element.
  const bool inside = row0 + R <= m && col0 + C <= n;
  const T* a_src[LA];
  const T* b_src[LB];
  unsigned a_dst[LA], b_dst[LB]; // shared-memory addresses in buffer 0
#pragma unroll
  for (int l = 0; l < LA; ++l) {
    int r, kk;
    a_at(l, r, kk);
    a_src[l] = A.data + (row0 + r) * A.rs + kk * A.cs;
    a_dst[l] = static_cast<unsigned>(__cvta_generic_to_shared(&As[0][r][kk]));
  }
#pragma unroll
  for (int l = 0; l < LB; ++l) {
    int cc, kk;
    b_at(l, cc, kk);
    b_src[l] = B.data + kk * B.rs + (col0 + cc) * B.cs;
    b_dst[l] = static_cast<unsigned>(__cvta_generic_to_shared(&Bs[0][cc][kk]));
  }
  constexpr unsigned kABuf = sizeof(As[0]), kBBuf = sizeof(Bs[0]);
  auto issue = [&](i64 t) {
    if (t < steps) {
      const int buf = static_cast<int>(t % NS);
      const i64 k0 = t * S;
      if (inside && k0 + S <= k) {
        const i64 ak = k0 * A.cs, bk = k0 * B.rs;
#pragma unroll
        for (int l = 0; l < LA; ++l)
          copy_async<T>(a_dst[l] + buf * kABuf, a_src[l] + ak);
#pragma unroll
        for (int l = 0; l < LB; ++l)
          copy_async<T>(b_dst[l] + buf * kBBuf, b_src[l] + bk);
      } else {
#pragma unroll
        for (int l = 0; l < LA; ++l) {
          int r, kk;
          a_at(l, r, kk);
          const i64 gr = row0 + r, gk = k0 + kk;
          if (gr < m && gk < k)
            __pipeline_memcpy_async(&As[buf][r][kk], A.data + gr * A.rs + gk * A.cs, sizeof(T));
          else
            As[buf][r][kk] = T(0);
        }
#pragma unroll
        for (int l = 0; l < LB; ++l) {
          int cc, kk;
          b_at(l, cc, kk);
          const i64 gk = k0 + kk, gc = col0 + cc;
          if (gk < k && gc < n)
            __pipeline_memcpy_async(&Bs[buf][cc][kk], B.data + gk * B.rs + gc * B.cs, sizeof(T));
          else
            Bs[buf][cc][kk] = T(0);
        }
      }
    }
    __pipeline_commit();
  };
#pragma unroll
  for (int t = 0; t < NS - 1; ++t)
    issue(t);
  T acc = T(0);
  for (i64 t = 0; t < steps; ++t) {
    // Step t has landed (this thread's copies, then everyone's), and every thread is done with
    // step t - 1, whose buffer the copies of step t + NS - 1 now fill.
    __pipeline_wait_prior(NS - 2);
    __syncthreads();
    issue(t + NS - 1);
    const int buf = static_cast<int>(t % NS);
#pragma unroll
    for (int q = 0; q < S; q += W) {
      T a[W], b[W];
      load16(&As[buf][ty][q], a);
      load16(&Bs[buf][tx][q], b);
#pragma unroll
      for (int w = 0; w < W; ++w)
        acc = rn_add(acc, rn_mul(a[w], b[w]));
    }
  }
  const i64 r = row0 + ty, col = col0 + tx;
  if (r < m && col < n) {
    T* e = c + r * crs + col * ccs;
    *e = epi(acc, e);
  }
}

// Few outputs with a long k (a weight gradient such as h^T @ dO: 16 x 7 outputs, k = 2708): one
// tile would be one block walking k alone. Here a warp per output element: lanes form the rounded
// products of 128 consecutive k (the next 512 already loading), stage them in shared memory, and
// lane 0 folds them in ascending k with rn_add: the same chain as the tiles and the CPU.
constexpr int kWarpAhead = 4;              // products per lane per step
constexpr int kWarpStep = 32 * kWarpAhead; // k per step
constexpr int kWarpsPerBlock = 8;
constexpr int kWarpDepth = 4; // steps in flight
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemm_warp_per_output(Mat<T> A, Mat<T> B, T* c, i64 crs, i64 ccs, i64 m, i64 n, i64 k,
                         Epilogue<T> epi) {
  __shared__ T staged[kWarpsPerBlock][kWarpStep];
  const int wb = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const i64 w = static_cast<i64>(blockIdx.x) * kWarpsPerBlock + wb;
  if (w >= m * n)
    return; // the same for the whole warp
  const i64 i = w / n, j = w % n;
  const T* a = A.data + i * A.rs;
  const T* b = B.data + j * B.cs;
  // kWarpDepth steps of operands are in flight: the global loads of step q + kWarpDepth are
  // issued before step q is multiplied and folded (products are formed only when staged, so no
  // instruction waits on a load issued in the same step).
  T va[kWarpDepth][kWarpAhead], vb[kWarpDepth][kWarpAhead];
  auto load = [&](int d, i64 pc) {
#pragma unroll
    for (int g = 0; g < kWarpAhead; ++g) {
      const i64 p = pc + g * 32 + lane;
      va[d][g] = p < k ? a[p * A.cs] : T(0);
      vb[d][g] = p < k ? b[p * B.rs] : T(0);
    }
  };
#pragma unroll
  for (int d = 0; d < kWarpDepth; ++d)
    load(d, d * kWarpStep);
  T acc = T(0);
  for (i64 p0 = 0; p0 < k; p0 += kWarpDepth * kWarpStep) {
#pragma unroll
    for (int d = 0; d < kWarpDepth; ++d) {
      const i64 pc = p0 + d * kWarpStep;
      if (pc >= k)
        break; // the same for the whole warp
#pragma unroll
      for (int g = 0; g < kWarpAhead; ++g)
        staged[wb][g * 32 + lane] = rn_mul(va[d][g], vb[d][g]);
      __syncwarp();
      load(d, pc + kWarpDepth * kWarpStep);
      if (lane == 0) {
        const int cnt = k - pc < kWarpStep ? static_cast<int>(k - pc) : kWarpStep;
        if (cnt == kWarpStep) {
#pragma unroll
          for (int t = 0; t < kWarpStep; ++t)
            acc = rn_add(acc, staged[wb][t]);
        } else {
          for (int t = 0; t < cnt; ++t)
            acc = rn_add(acc, staged[wb][t]);
        }
      }
      __syncwarp();
    }
  }
  if (lane == 0) {
    T* e = c + i * crs + j * ccs;
    *e = epi(acc, e);
  }
}

// Tall, thin products at portable (a million rows times a 128 x 16 weight): the tiles above are
// 128 columns wide for large outputs, so 16 columns wasted 7/8 of their work. Here a thread owns
// kThinRows<T> rows (kThinBlock apart, so that a warp's stores of c cover consecutive rows) and 16
// columns, and walks k ascending 8 at a time: the next 8 elements of each of its rows of a are
// loaded (32 bytes a row when a's rows run along k and are aligned) while the current 8 are
// multiplied, and b's rows come from shared memory in chunks of k, every lane of a warp reading the
// same row (one broadcast). Columns past n read +0 from b and are not written; k is not padded.
constexpr int kThinCols = 16, kThinBlock = 128, kThinK = 8, kThinChunk = 256;
constexpr i64 kThinMinRows = 65536; // fewer rows: too few blocks for a large GPU
template <class T> constexpr int kThinRows = sizeof(T) == 4 ? 4 : 2;
template <class T>
__global__ void __launch_bounds__(kThinBlock)
    gemm_thin(Mat<T> A, Mat<T> B, T* c, i64 crs, i64 ccs, i64 m, i64 n, i64 k, Epilogue<T> epi) {
  constexpr int R = kThinRows<T>, C = kThinCols, KS = kThinK, W = kPerVec16<T>;
  __shared__ __align__(16) T Bs[kThinChunk][C];
  const i64 col0 = static_cast<i64>(blockIdx.y) * C;
  const i64 row0 = static_cast<i64>(blockIdx.x) * R * kThinBlock + threadIdx.x;
  const bool vec = A.cs == 1 && A.rs % W == 0 && aligned16(A.data);
  T acc[R][C];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j)
      acc[i][j] = T(0);
  // a[i][q] = A(row i, p + q) for whole steps of KS inside k; rows past m read +0 (never written).
  auto load_step = [&](i64 p, T(&a)[R][KS]) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const i64 r = row0 + i * kThinBlock;
      if (r >= m) {
#pragma unroll
        for (int q = 0; q < KS; ++q)
          a[i][q] = T(0);
      } else if (vec) {
        load16(A.data + r * A.rs + p, a[i]);
      } else {
#pragma unroll
        for (int q = 0; q < KS; ++q)
          a[i][q] = A(r, p + q);
      }
    }
  };
  auto multiply = [&](const T(&a)[R][KS], int kk, int steps) {
#pragma unroll
    for (int q = 0; q < KS; ++q) {
      if (q >= steps)
        break;
      T b[C];
      load16(&Bs[kk + q][0], b);
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < C; ++j)
          acc[i][j] = rn_add(acc[i][j], rn_mul(a[i][q], b[j]));
    }
  };
  for (i64 k0 = 0; k0 < k; k0 += kThinChunk) {
    const int kc = static_cast<int>(k - k0 < kThinChunk ? k - k0 : kThinChunk);
    __syncthreads(); // the previous chunk of b has been read
    for (int e = static_cast<int>(threadIdx.x); e < kc * C; e += kThinBlock) {
      const int kk = e / C, j = e % C;
      Bs[kk][j] = col0 + j < n ? B(k0 + kk, col0 + j) : T(0);
    }
    __syncthreads();
    const int whole = kc / KS * KS;
    T a[2][R][KS];
    if (whole > 0)
      load_step(k0, a[0]);
    for (int kk = 0; kk < whole; kk += 2 * KS) {
      if (kk + KS < whole)
        load_step(k0 + kk + KS, a[1]);
      multiply(a[0], kk, KS);
      if (kk + KS >= whole)
        break;
      if (kk + 2 * KS < whole)
        load_step(k0 + kk + 2 * KS, a[0]);
      multiply(a[1], kk + KS, KS);
    }
    if (whole < kc) { // the last 1-7 elements of k
      T t[R][KS];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const i64 r = row0 + i * kThinBlock;
#pragma unroll
        for (int q = 0; q < KS; ++q)
          t[i][q] = r < m && whole + q < kc ? A(r, k0 + whole + q) : T(0);
      }
      multiply(t, whole, kc - whole);
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const i64 r = row0 + i * kThinBlock;
    if (r >= m)
      continue;
    T* e = c + r * crs + col0 * ccs;
    if (ccs == 1 && col0 + C <= n && aligned16(e)) {
      store_through16(e, acc[i], epi);
      continue;
    }
#pragma unroll
    for (int j = 0; j < C; ++j)
      if (col0 + j < n)
        e[j * ccs] = epi(acc[i][j], e + j * ccs);
  }
}

// c = epi(+0, c) for every element: k == 0, alpha == 0, and the beta * c step of split-K.
template <class T>
__global__ void gemm_scale(T* c, i64 crs, i64 ccs, i64 m, i64 n, Epilogue<T> epi) {
  const i64 total = m * n;
  for (i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<i64>(gridDim.x) * blockDim.x) {
    T* e = c + (idx / n) * crs + (idx % n) * ccs;
    *e = epi(T(0), e);
  }
}

enum class Tiles { wide = 1, narrow = 2, deep = 3 };

// Test hook: 0 picks the tile shape from the problem size; 1, 2, 3 force wide, narrow, deep tiles
// and bypass the warp-per-output and thin kernels; 4 forces the thin kernel.
std::atomic<int> g_tile_override{0};

template <class Cfg> i64 tile_count(i64 m, i64 n) {
  return ((m + Cfg::BM - 1) / Cfg::BM) * ((n + Cfg::BN - 1) / Cfg::BN);
}

// A function of the shape alone (fixed counts, not the GPU's): wide tiles when there are enough
// of them to occupy a large GPU; deep ones when few narrow tiles would each walk a long k.
Tiles choose_tiles(i64 m, i64 n, i64 k) {
  const int o = g_tile_override.load();
  if (o >= 1 && o <= 3)
    return static_cast<Tiles>(o);
  if (tile_count<WideTiles>(m, n) >= 128)
    return Tiles::wide;
  if (tile_count<NarrowTiles>(m, n) < 132 && k >= 1024)
    return Tiles::deep;
  return Tiles::narrow;
}

template <class T> Epilogue<T> epilogue_of(const GemmArgs& g) {
  return {static_cast<T>(g.alpha), static_cast<T>(g.beta)};
}

template <class T> void launch_scale(const GemmArgs& g, Epilogue<T> epi, cudaStream_t s) {
  const i64 total = g.m() * g.n();
  const i64 blocks = std::min<i64>((total + 255) / 256, 8192);
  gemm_scale<T><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
      static_cast<T*>(g.c.data), g.c.strides[0], g.c.strides[1], g.m(), g.n(), epi);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_scale");
}

template <class T, class Cfg>
void launch_tiles(const GemmArgs& g, Epilogue<T> epi, i64 splits, i64 k_chunk, bool atomic,
                  cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((g.m() + Cfg::BM - 1) / Cfg::BM),
                  static_cast<unsigned>((g.n() + Cfg::BN - 1) / Cfg::BN),
                  static_cast<unsigned>(splits));
  gemm_tiles<T, Cfg><<<grid, kThreads<Cfg>, 0, s>>>(
      g.mat_a<T>(), g.mat_b<T>(), static_cast<T*>(g.c.data), g.c.strides[0], g.c.strides[1], g.m(),
      g.n(), g.k(), k_chunk, epi, atomic);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_tiles");
}

template <class T> void launch_long_k(const GemmArgs& g, Epilogue<T> epi, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((g.m() + kLongRows - 1) / kLongRows),
                  static_cast<unsigned>((g.n() + kLongCols - 1) / kLongCols));
  gemm_long_k<T><<<grid, kLongThreads, 0, s>>>(g.mat_a<T>(), g.mat_b<T>(),
                                               static_cast<T*>(g.c.data), g.c.strides[0],
                                               g.c.strides[1], g.m(), g.n(), g.k(), epi);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_long_k");
}

// Grid limits: m tiles on x (2^31 - 1), n tiles on y (65535); the smallest tiles decide.
static_assert(DeepTiles::BN == kLongCols && NarrowTiles::BN == kLongCols,
              "the narrowest column tiles set the n limit");
std::string tiles_why_not(const GemmArgs& g) {
  if ((g.n() + DeepTiles::BN - 1) / DeepTiles::BN > 65535)
    return "n = " + std::to_string(g.n()) + " needs more than 65535 column tiles";
  if ((g.m() + kLongRows - 1) / kLongRows > INT_MAX)
    return "m = " + std::to_string(g.m()) + " needs more than 2^31 - 1 row tiles";
  return {};
}

template <class T, class Cfg>
void run_tiles_cfg(const GemmArgs& g, Epilogue<T> epi, cudaStream_t s, bool split_k) {
  i64 splits = 1, chunk = g.k();
  if (split_k) {
    // Enough blocks for a large GPU, and pieces of k of at least a few tiles.
    const i64 tiles = tile_count<Cfg>(g.m(), g.n());
    splits =
        std::clamp<i64>(std::max<i64>((256 + tiles - 1) / tiles, (g.k() + 4095) / 4096), 1, 64);
    chunk = ((g.k() + splits - 1) / splits + Cfg::BK - 1) / Cfg::BK * Cfg::BK;
    splits = (g.k() + chunk - 1) / chunk;
    launch_scale<T>(g, Epilogue<T>{T(0), epi.beta}, s); // c = beta * c
  }
  launch_tiles<T, Cfg>(g, epi, splits, chunk, split_k, s);
}

template <class T> void run_tiled_t(const GemmArgs& g, cudaStream_t s, bool split_k) {
  const Epilogue<T> epi = epilogue_of<T>(g);
  if (g.k() == 0 || epi.alpha == T(0))
    return launch_scale<T>(g, epi, s);
  const int forced = g_tile_override.load();
  if (!split_k &&
      (forced == 4 || (forced == 0 && g.n() <= 2 * kThinCols && g.m() >= kThinMinRows))) {
    const dim3 grid(static_cast<unsigned>((g.m() + kThinRows<T> * kThinBlock - 1) /
                                          (kThinRows<T> * kThinBlock)),
                    static_cast<unsigned>((g.n() + kThinCols - 1) / kThinCols));
    gemm_thin<T><<<grid, kThinBlock, 0, s>>>(g.mat_a<T>(), g.mat_b<T>(), static_cast<T*>(g.c.data),
                                             g.c.strides[0], g.c.strides[1], g.m(), g.n(), g.k(),
                                             epi);
    SAMEBITS_CUDA_CHECK_LAUNCH("gemm_thin");
    append_last_explain("; thin kernel (a thread per few rows and 16 columns)");
    return;
  }
  if (!split_k && forced == 0 && g.m() * g.n() <= 1024 && g.k() >= 1024) {
    const i64 blocks = (g.m() * g.n() + kWarpsPerBlock - 1) / kWarpsPerBlock;
    gemm_warp_per_output<T><<<static_cast<unsigned>(blocks), 32 * kWarpsPerBlock, 0, s>>>(
        g.mat_a<T>(), g.mat_b<T>(), static_cast<T*>(g.c.data), g.c.strides[0], g.c.strides[1],
        g.m(), g.n(), g.k(), epi);
    SAMEBITS_CUDA_CHECK_LAUNCH("gemm_warp_per_output");
    return;
  }
  switch (choose_tiles(g.m(), g.n(), g.k())) {
  case Tiles::wide:
    if constexpr (sizeof(T) == 4)
      return run_tiles_cfg<T, WideFloatTiles>(g, epi, s, split_k);
    else
      return run_tiles_cfg<T, WideTiles>(g, epi, s, split_k);
  case Tiles::narrow:
    return run_tiles_cfg<T, NarrowTiles>(g, epi, s, split_k);
  case Tiles::deep:
    if (split_k)
      return run_tiles_cfg<T, DeepTiles>(g, epi, s, split_k);
    return launch_long_k<T>(g, epi, s);
  }
}

void run_tiled(const GemmArgs& g, const Workspace& ws, bool split_k) {
  if (g.m() == 0 || g.n() == 0)
    return;
  const cudaStream_t s = SAMEBITS_STREAM(ws.stream);
  if (g.c.dtype == DType::f32)
    run_tiled_t<float>(g, s, split_k);
  else
    run_tiled_t<double>(g, s, split_k);
}

// --- cuBLAS, one handle and workspace per (device, stream) --------------------------------------

constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20; // cuBLAS's advice for Hopper

void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("cuBLAS call failed: ") + what + ": " + cublasGetStatusString(st));
}

struct BlasHandle {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex m; // calls are enqueued one at a time; the stream orders their execution
};

// Never destroyed: handles and workspaces live as long as the process (device teardown order at
// exit is not ours to race with), or until release_stream gives a stream's back.
struct BlasHandles {
  std::mutex mutex;
  std::map<std::pair<int, void*>, std::unique_ptr<BlasHandle>> by_stream;
};
BlasHandles& blas_handles() {
  static auto* h = new BlasHandles;
  return *h;
}

BlasHandle& blas_handle(int device, cudaStream_t stream) {
  auto& all = blas_handles();
  std::lock_guard lock(all.mutex);
  auto& slot = all.by_stream[{device, static_cast<void*>(stream)}];
  if (slot)
    return *slot;
  auto h = std::make_unique<BlasHandle>();
  check_blas(cublasCreate(&h->handle), "cublasCreate");
  // cublasSetStream resets the workspace to the default pool, so the stream comes first.
  check_blas(cublasSetStream(h->handle, stream), "cublasSetStream");
  h->workspace = cuda_allocate(kBlasWorkspaceBytes, device, Stream{stream});
  check_blas(cublasSetWorkspace(h->handle, h->workspace, kBlasWorkspaceBytes),
             "cublasSetWorkspace");
  check_blas(cublasSetMathMode(h->handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check_blas(cublasSetAtomicsMode(h->handle, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
  check_blas(cublasSetPointerMode(h->handle, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  slot = std::move(h);
  return *slot;
}

// A logical rows x cols operand as cuBLAS sees it: column-major storage, maybe transposed.
struct BlasOperand {
  cublasOperation_t op = CUBLAS_OP_N;
  i64 ld = 1;
  bool ok = false;
};

BlasOperand blas_operand(i64 rows, i64 cols, i64 rs, i64 cs) {
  if (rs < 0 || cs < 0)
    return {};
  if (rs == 1 || rows <= 1) { // column-major as it is
    const i64 ld = cols > 1 ? cs : std::max<i64>(1, rows);
    if (ld >= std::max<i64>(1, rows) && ld <= INT_MAX)
      return {CUBLAS_OP_N, ld, true};
  }
  if (cs == 1 || cols <= 1) { // row-major: the transpose of a column-major cols x rows
    const i64 ld = rows > 1 ? rs : std::max<i64>(1, cols);
    if (ld >= std::max<i64>(1, cols) && ld <= INT_MAX)
      return {CUBLAS_OP_T, ld, true};
  }
  return {};
}

// The cuBLAS problem: C' = A' B' with C' column-major (m', n'). Either C itself (C column-major)
// or C^T = op(b)^T op(a)^T (C row-major).
struct BlasPlan {
  bool ok = false;
  bool swapped = false; // computing C^T
  i64 m = 0, n = 0, k = 0, ldc = 1;
  BlasOperand a, b;
  std::string why;
};

BlasPlan blas_plan(const GemmArgs& g) {
  BlasPlan p;
  const i64 m = g.m(), n = g.n(), k = g.k();
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    p.why = "a dimension exceeds cuBLAS's 32-bit sizes";
    return p;
  }
  const i64 crs = g.c.strides[0], ccs = g.c.strides[1];
  const i64 ars = g.a.strides[0], acs = g.a.strides[1], brs = g.b.strides[0], bcs = g.b.strides[1];
  const BlasOperand c_direct = blas_operand(m, n, crs, ccs);
  if (c_direct.ok && c_direct.op == CUBLAS_OP_N) {
    p = {true,
         false,
         m,
         n,
         k,
         c_direct.ld,
         blas_operand(m, k, ars, acs),
         blas_operand(k, n, brs, bcs),
         {}};
  } else {
    const BlasOperand c_t = blas_operand(n, m, ccs, crs);
    if (!(c_t.ok && c_t.op == CUBLAS_OP_N)) {
      p.why = "c needs a unit stride in one dimension (and a leading dimension that fits cuBLAS)";
      return p;
    }
    p = {true, true, n, m, k, c_t.ld, blas_operand(n, k, bcs, brs), blas_operand(k, m, acs, ars),
         {}};
  }
  if (!p.a.ok || !p.b.ok) {
    p.ok = false;
    p.why =
        "a and b need a unit stride in one dimension (and a leading dimension that fits cuBLAS)";
  }
  return p;
}

template <class T> void run_cublas_t(const GemmArgs& g, cudaStream_t s) {
  const Epilogue<T> epi = epilogue_of<T>(g);
  // Same rule as the other variants for k == 0 and alpha == 0 (a and b not read).
  if (g.k() == 0 || epi.alpha == T(0))
    return launch_scale<T>(g, epi, s);
  const BlasPlan p = blas_plan(g);
  if (!p.ok)
    throw InvalidArgument("gemm: cuda.cublas cannot take these operands: " + p.why);
  const T* first = static_cast<const T*>(p.swapped ? g.b.data : g.a.data);
  const T* second = static_cast<const T*>(p.swapped ? g.a.data : g.b.data);
  BlasHandle& h = blas_handle(g.c.device.index, s);
  std::lock_guard lock(h.m);
  const auto M = static_cast<int>(p.m), N = static_cast<int>(p.n), K = static_cast<int>(p.k);
  // beta == 0: cuBLAS does not read C, as BLAS specifies.
  if constexpr (sizeof(T) == 4)
    check_blas(cublasSgemm(h.handle, p.a.op, p.b.op, M, N, K, &epi.alpha, first,
                           static_cast<int>(p.a.ld), second, static_cast<int>(p.b.ld), &epi.beta,
                           static_cast<T*>(g.c.data), static_cast<int>(p.ldc)),
               "cublasSgemm");
  else
    check_blas(cublasDgemm(h.handle, p.a.op, p.b.op, M, N, K, &epi.alpha, first,
                           static_cast<int>(p.a.ld), second, static_cast<int>(p.b.ld), &epi.beta,
                           static_cast<T*>(g.c.data), static_cast<int>(p.ldc)),
               "cublasDgemm");
}

void run_cublas(const GemmArgs& g, const Workspace& ws) {
  if (g.m() == 0 || g.n() == 0)
    return;
  const cudaStream_t s = SAMEBITS_STREAM(ws.stream);
  if (g.c.dtype == DType::f32)
    run_cublas_t<float>(g, s);
  else
    run_cublas_t<double>(g, s);
}

std::string cublas_why_not(const GemmArgs& g) {
  if (g.m() == 0 || g.n() == 0 || g.k() == 0)
    return {};
  const BlasPlan p = blas_plan(g);
  return p.ok ? std::string{} : p.why;
}

// Products with a short k and few outputs (the small layers of a GNN: [2708 x 16] @ [16 x 7]) run
// faster in the tiled kernel than through cuBLAS's launch and heuristics; the tiled kernel is
// portable, so it also serves run_to_run requests for them.
constexpr std::int64_t kSmallMaxK = 64;
constexpr std::int64_t kSmallMaxOutputs = std::int64_t{1} << 22;

std::string tiled_small_why_not(const GemmArgs& g) {
  std::string why = tiles_why_not(g);
  if (!why.empty())
    return why;
  if (g.k() > kSmallMaxK || g.m() * g.n() > kSmallMaxOutputs)
    return "not a small product (k <= 64 and m*n <= 2^22): cuBLAS or cuda.tiled take it";
  return {};
}

} // namespace

void set_cuda_gemm_tiles(int which) {
  g_tile_override.store(which);
}

void release_blas_handle(int device, Stream stream) {
  auto& all = blas_handles();
  std::unique_ptr<BlasHandle> h;
  {
    std::lock_guard lock(all.mutex);
    const auto it = all.by_stream.find({device, stream.handle});
    if (it == all.by_stream.end())
      return;
    h = std::move(it->second);
    all.by_stream.erase(it);
  }
  std::lock_guard in_use(h->m); // a call still enqueuing on it finishes first
  cublasDestroy(h->handle);
  cuda_free(h->workspace, device, stream);
}

void register_cuda_gemm(Registry& r) {
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.split_k_atomic", DeviceType::cuda, Determinism::not_guaranteed,
       "k split across blocks; alpha * partials added with atomicAdd in completion order"},
      tiles_why_not,
      nullptr,
      [](const GemmArgs& g, const Workspace& ws) { run_tiled(g, ws, true); }});
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.tiled_small", DeviceType::cuda, Determinism::portable,
       "the cuda.tiled kernel, preferred for short-k products with few outputs (faster than "
       "cuBLAS there; same bits as cuda.tiled and the CPU)"},
      tiled_small_why_not,
      nullptr,
      [](const GemmArgs& g, const Workspace& ws) { run_tiled(g, ws, false); }});
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.cublas", DeviceType::cuda, Determinism::run_to_run,
       "cuBLAS with one handle and fixed workspace per (device, stream), no atomics, no TF32"},
      cublas_why_not,
      nullptr,
      run_cublas});
  r.add(Variant<GemmArgs>{
      {"gemm", "cuda.tiled", DeviceType::cuda, Determinism::portable,
       "shared-memory tiles; each element sums k ascending with __fmul_rn/__fadd_rn (canonical "
       "order, equal to the CPU)"},
      tiles_why_not,
      nullptr,
      [](const GemmArgs& g, const Workspace& ws) { run_tiled(g, ws, false); }});
}

} // namespace samebits::detail

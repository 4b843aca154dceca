// The CUDA kernels of gemm's portable and split-K variants (src/cuda/gemm.cu launches them): the
// tiled kernel, which sums one chunk of k (an aligned run of canonical blocks) per thread block,
// the kernel that combines the chunks' sums with the canonical tree, and the alpha == 0 / k == 0
// kernel. Canonical order: include/samebits/ops/gemm.hpp.
#pragma once
#include "cuda/vec16.cuh"
#include "ops/gemm.hpp"

#include <cstdint>
#include <type_traits>

namespace samebits::detail::cuda_gemm {

using i64 = std::int64_t;

// Levels of the threads' block counters: chunks of up to 2^(kLevels - 1) blocks.
constexpr int kLevels = 9;
static_assert(kGemmMaxGroupBlocks == 1 << (kLevels - 1), "a chunk's counter fits its stack");

// Where a thread block's chunk sum goes: through the epilogue into c (the chunk is all of k),
// raw into scratch (chunk z at c + z * zstride; gemm_combine finishes), or alpha * sum added
// atomically onto c (cuda.split_k_atomic, after c = beta * c).
enum class TileOut : int { final_c, partial, atomic_add };

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

// f(x[i], y[i]) for every element of two arrays of one shape (any rank), unrolled.
template <class X, class Y, class F> __device__ __forceinline__ void each_pair(X& x, Y& y, F f) {
  if constexpr (std::is_array_v<X>) {
#pragma unroll
    for (int i = 0; i < static_cast<int>(std::extent_v<X>); ++i)
      each_pair(x[i], y[i], f);
  } else {
    f(x, y);
  }
}

// Every element of an array of any rank set to +0 (a thread's sums before a canonical block).
template <class X> __device__ __forceinline__ void set_zero(X& x) {
  if constexpr (std::is_array_v<X>) {
#pragma unroll
    for (int i = 0; i < static_cast<int>(std::extent_v<X>); ++i)
      set_zero(x[i]);
  } else {
    x = X(0);
  }
}

// A thread's block counter over its outputs (Acc: an array of them, T[N] or T[TM][TN]): the
// canonical tree over its chunk's k blocks (src/ops/gemm.hpp: gemm_store_level). Level l holds the
// sum of an aligned run of 2^l blocks; it lives in local memory, touched once per block.
template <class Acc> struct BlockCounter {
  Acc stack[kLevels];
  int pushed = 0;
  // acc, the sum of the next block, joins the counter (acc then holds the entry it became).
  __device__ __forceinline__ void push(Acc& acc) {
    const int top = gemm_store_level(pushed);
    for (int l = 0; l < top; ++l)
      each_pair(stack[l], acc, [](auto s, auto& a) { a = rn_add(s, a); });
    each_pair(stack[top], acc, [](auto& s, auto a) { s = a; });
    ++pushed;
  }
  // After the last push acc holds the entry at level ctz(pushed); add the higher set bits.
  __device__ __forceinline__ void fold(Acc& acc) {
    if (pushed == 0)
      return;
    for (int l = gemm_store_level(pushed - 1) + 1; l < kLevels && (pushed >> l) != 0; ++l)
      if ((pushed >> l) & 1)
        each_pair(stack[l], acc, [](auto s, auto& a) { a = rn_add(s, a); });
  }
};

// N adjacent outputs of row r from column col: 16 bytes at a time where c's rows run along memory,
// the run lies inside n and is aligned, else one by one, columns past n left alone. `atomic` adds
// alpha * run onto c, `raw` stores the sums as they are, else the epilogue writes them.
template <class T, int N>
__device__ __forceinline__ void store_run(T* c, i64 r, i64 col, i64 crs, i64 ccs, i64 n,
                                          const T (&run)[N], const Epilogue<T>& epi, bool atomic,
                                          bool raw) {
  T* e = c + r * crs + col * ccs;
  if (!atomic && ccs == 1 && col + N <= n && aligned16(e)) {
    if (raw)
      store16(e, run);
    else
      store_through16(e, run, epi);
    return;
  }
#pragma unroll
  for (int q = 0; q < N; ++q) {
    if (col + q >= n)
      continue;
    T* eq = e + q * ccs;
    if (atomic)
      atomicAdd(eq, epi.alpha == T(1) ? run[q] : rn_mul(epi.alpha, run[q]));
    else
      *eq = raw ? run[q] : epi(run[q], eq);
  }
}

// Tile shapes: BM x BN outputs per block of (BM/TM) x (BN/TN) threads, k in steps of BK.
// Wide: large outputs (register-blocked 8x8 per thread). Narrow: thin outputs with short k.
// Deep: few output tiles and long k (weight gradients) cut into many chunks of k: more blocks,
// and 128-deep k steps loaded one step ahead so each thread has global loads in flight while it
// computes.
// PF: the next k step's tiles are loaded into registers while this step is computed (the deep
// tiles' long k walk would otherwise wait for global memory at every step).
// CONTIG: a thread's TM rows are adjacent, and its TN columns two runs of adjacent ones, so it
// reads them from shared memory, and writes its rows of c, 16 bytes at a time (else they are RY
// and RX apart, one element each).
// The float wide tiles also load the next k step ahead (PF), 16 k deep, into two buffers, 16 bytes
// at a time where they can (DB, VEC); the double CUDA-core tiles stay element-wise (16-byte loads
// made them slower on an H200), the m16n8k4 tensor-core ones do not.
// DB: two shared-memory buffers, so that a k step is stashed while the other is read (one
// barrier per step instead of two). VEC: 16-byte global loads of whole tiles when A's rows run
// along k and B's along n, aligned, and the tile lies inside the matrices.
// The options a config leaves out are off: VEC_M (an m-fast A read by vectors), MMA (the FP64
// tensor cores) and MMA_16X8 (their sm_90 m16n8k4 instruction).
struct TileOptions {
  static constexpr bool VEC_M = false, MMA = false, MMA_16X8 = false;
};
struct WideTiles : TileOptions {
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  static constexpr bool PF = false, CONTIG = false, DB = false, VEC = false;
};
struct WideFloatTiles : TileOptions {
  static constexpr int BM = 128, BN = 128, BK = 16, TM = 8, TN = 8;
  static constexpr bool PF = true, CONTIG = true, DB = true, VEC = true;
};
// The same with A's columns running along m (a transposed a: the weight gradient x^T @ dH), read
// 16 bytes (W rows at one k) at a time and stored as they are into the k-major shared tile.
struct WideFloatTilesMFast : WideFloatTiles {
  static constexpr bool VEC_M = true;
};
// The double wide tiles on the FP64 tensor cores (sm_80 and later): each warp computes 64 x 32
// outputs, 4 k at a time, as 8 x 4 products of 8 x 8 (mma.sync m8n8k4 .f64) or, on sm_90, as 4 x 4
// products of 16 x 8 (m16n8k4, two of the former stacked along m). Both compute each output as the
// chain of four correctly rounded fmas in ascending k from the accumulator, which is the canonical
// order's step: the same bits as the CUDA-core tiles and the CPU. The probe in bench/gpu_dmma.cu
// found 4194304 of 4194304 m8n8k4 outputs equal to that chain on an H200 (2659023 equal to the
// descending one), and test_gemm_gpu checks both instructions against the CPU, bit for bit, with
// signed zeros, subnormals, infinities and NaN among the operands. A thread's acc[i][j] is the
// output (warp row + 8 i + lane / 4, warp column + 8 (j / 2) + 2 (lane % 4) + j % 2). The shared
// tiles are padded to 132 doubles per k so that a fragment's 32 loads (8 rows x 4 k) hit every
// bank once per half warp. On an H200, 4096^3 took 6.09 ms with m16n8k4 (5.05 with 16-byte
// loads, run 140), 8.16 with m8n8k4 and 10.94 on the CUDA cores (run 139).
struct WideDoubleMmaTiles : TileOptions {
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  static constexpr bool PF = true, CONTIG = false, DB = true, VEC = false, MMA = true;
};
// The m16n8k4 tiles also load whole tiles 16 bytes at a time where they can (VEC).
struct WideDoubleMma16x8Tiles : WideDoubleMmaTiles {
  static constexpr bool MMA_16X8 = true, VEC = true;
};

// d = a * b + c over one 8 x 8 x 4 double product (one warp, the fragment layout above): the
// tensor-core instruction, or on GPUs without it the same four fmas per output in ascending k
// from the shared tiles (As[kk][row], Bs[kk][col]), which give the same bits.
template <int SA, int SB>
__device__ __forceinline__ void mma_8x8x4(double& d0, double& d1, double a, double b,
                                          const double* As, const double* Bs, int row, int col) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  (void)As, (void)Bs, (void)row, (void)col;
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
      : "+d"(d0), "+d"(d1)
      : "d"(a), "d"(b));
#else
  (void)a, (void)b;
  for (int q = 0; q < 4; ++q) {
    d0 = rn_fma(As[q * SA + row], Bs[q * SB + col], d0);
    d1 = rn_fma(As[q * SA + row], Bs[q * SB + col + 1], d1);
  }
#endif
}
struct NarrowTiles : TileOptions {
  static constexpr int BM = 32, BN = 16, BK = 16, TM = 2, TN = 1;
  static constexpr bool PF = false, CONTIG = false, DB = false, VEC = false;
};
struct DeepTiles : TileOptions {
  static constexpr int BM = 16, BN = 16, BK = 128, TM = 1, TN = 1;
  static constexpr bool PF = true, CONTIG = false, DB = false, VEC = false;
};

template <class Cfg> constexpr int kThreads = (Cfg::BM / Cfg::TM) * (Cfg::BN / Cfg::TN);

// Block (x, y, z) computes rows [x*BM, +BM) x columns [y*BN, +BN) over k in [z*k_chunk, +k_chunk),
// k_chunk a power-of-two number of canonical blocks, so the chunk is an aligned subtree of the
// canonical tree: each thread sums each block as an fma chain from +0 and pushes it onto its
// block counter (a stack of kLevels levels in local memory, touched once per 256 k), then folds the
// counter (src/ops/gemm.hpp). Elements past k are -0 in A and +0 in B: their product is -0, and
// fma(-0, +0, s) == s for every s (-0 is the identity of IEEE addition), so padding changes no
// bit; rows/columns past m/n are not written. `mode` says where the chunk's sum goes.
// One block per SM as the launch bound: the compiler may then keep the wide tiles' 8 x 8
// accumulators, operands and next k step in registers (255 for float, no spills) instead of
// aiming at more blocks with fewer and a longer instruction stream (with 8-deep steps and one
// buffer this bound took 4096^3 from 7.48 to 7.03 ms on an H200).
template <class T, class Cfg>
__global__ void __launch_bounds__(kThreads<Cfg>, 1)
    gemm_tiles(Mat<T> A, Mat<T> B, T* c, i64 crs, i64 ccs, i64 zstride, i64 m, i64 n, i64 k,
               i64 k_chunk, Epilogue<T> epi, TileOut mode) {
  static_assert(kGemmBlockK % Cfg::BK == 0, "k steps never straddle a canonical block");
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int NT = kThreads<Cfg>, RY = BM / TM, RX = BN / TN;
  constexpr bool CONTIG = Cfg::CONTIG;
  // CONTIG: a thread's TN columns are NG = 2 runs of GW adjacent columns, BN / 2 apart, so that the
  // 16 threads of a warp that share its rows read one contiguous 256-byte run of B's shared tile
  // per 16-byte load. With TN adjacent columns they read 16 bytes of every 32, two threads on each
  // group of four banks: twice the wavefronts, and 4096^3 floats took 3.889 ms against 3.570 on an
  // H200 (run 138).
  constexpr bool MMA = Cfg::MMA;
  static_assert(!MMA || (std::is_same_v<T, double> && TM == 8 && TN == 8 && BK % 4 == 0 &&
                         BM % 64 == 0 && BN % 32 == 0 && (BM / 64) * (BN / 32) * 32 == NT),
                "FP64 mma tiles: warps of 64 x 32 outputs, 4 k per instruction");
  constexpr int NG = CONTIG ? 2 : 1, GW = TN / NG;
  static_assert(!CONTIG || GW % kPerVec16<T> == 0, "runs of whole 16-byte vectors");
  constexpr int NB = Cfg::DB ? 2 : 1;
  static_assert(!Cfg::DB || Cfg::PF, "two buffers go with the next step loaded ahead");
  // (BK, BM): the padding spreads the k-fast stores over the banks (4 keeps 16-byte alignment)
  constexpr int PAD = CONTIG || MMA ? 4 : 1, PAD_B = MMA ? 4 : 0;
  __shared__ __align__(16) T As[NB][BK][BM + PAD];
  __shared__ __align__(16) T Bs[NB][BK][BN + PAD_B]; // (BK, BN)
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % RX, ty = tid / RX;
  // MMA: this warp's first row and column in the tile, the lane's row in a fragment and its k
  // (A, B) or column pair (C).
  constexpr int WARP_COLS = MMA ? BN / 32 : 1;
  const int lane = tid % 32, warp = tid / 32;
  const int wm = warp / WARP_COLS * 64, wn = warp % WARP_COLS * 32, group = lane / 4,
            tig = lane % 4;
  // The tile position of the thread's output acc[i][j].
  auto out_row = [&](int i) {
    if constexpr (MMA)
      return wm + i * 8 + group;
    else
      return ty + i * RY;
  };
  auto out_col = [&](int j) {
    if constexpr (MMA)
      return wn + (j / 2) * 8 + 2 * tig + j % 2;
    else
      return tx + j * RX;
  };
  const i64 row0 = static_cast<i64>(blockIdx.x) * BM, col0 = static_cast<i64>(blockIdx.y) * BN;
  const i64 kb = static_cast<i64>(blockIdx.z) * k_chunk;
  const i64 ke = kb + k_chunk < k ? kb + k_chunk : k;
  const bool a_k_fast = A.cs == 1, b_n_fast = B.cs == 1; // which index is contiguous in memory
  constexpr int W = kPerVec16<T>;
  // Whole tiles by 16-byte loads: every k step that lies inside the chunk, in a block whose tile
  // lies inside m and n (the others take the element-wise path below).
  constexpr bool VEC_M = Cfg::VEC_M;
  const bool a_vec_ok = VEC_M ? (A.rs == 1 && A.cs % W == 0) : (a_k_fast && A.rs % W == 0);
  const bool vec_block = Cfg::VEC && a_vec_ok && b_n_fast && B.rs % W == 0 && kb % W == 0 &&
                         aligned16(A.data) && aligned16(B.data) && row0 + BM <= m && col0 + BN <= n;

  T acc[TM][TN];
  set_zero(acc);
  BlockCounter<T[TM][TN]> counter;
  // A canonical block ends after the step at k0 when k0 + BK reaches a multiple of the block
  // length (relative to kb, itself a multiple) or the end of the chunk.
  auto block_ends = [&](i64 k0) { return (k0 + BK - kb) % kGemmBlockK == 0 || k0 + BK >= ke; };

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
    if constexpr (VEC_M) { // W rows at one k
      kk = v / (BM / W);
      r = v % (BM / W) * W;
    } else { // W k at one row
      r = v / (BK / W);
      kk = v % (BK / W) * W;
    }
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
          if constexpr (VEC_M)
            return A.data + (k0 + kk) * A.cs + row0 + r;
          else
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
      return (idx < BM * BK && gr < m && gk < ke) ? A.data[gr * A.rs + gk * A.cs] : -T(0);
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
          if constexpr (VEC_M) {
            T v[W];
#pragma unroll
            for (int q = 0; q < W; ++q)
              v[q] = pa[l * W + q];
            store16(&As[buf][kk][r], v);
          } else {
#pragma unroll
            for (int q = 0; q < W; ++q)
              As[buf][kk + q][r] = pa[l * W + q];
          }
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
    if constexpr (MMA) {
#pragma unroll
      for (int kk = 0; kk < BK; kk += 4) {
        T fa[TM], fb[TN / 2];
#pragma unroll
        for (int i = 0; i < TM; ++i)
          fa[i] = As[buf][kk + tig][wm + i * 8 + group];
#pragma unroll
        for (int j = 0; j < TN / 2; ++j)
          fb[j] = Bs[buf][kk + tig][wn + j * 8 + group];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        constexpr bool wide_mma = Cfg::MMA_16X8;
#else
        constexpr bool wide_mma = false; // m16n8k4 is sm_90's: here 16 x 8 tiles compute as 8 x 8
#endif
        if constexpr (wide_mma) {
#pragma unroll
          for (int i = 0; i < TM; i += 2)
#pragma unroll
            for (int j = 0; j < TN / 2; ++j)
              asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, "
                  "{%6}, {%0, %1, %2, %3};"
                  : "+d"(acc[i][2 * j]), "+d"(acc[i][2 * j + 1]), "+d"(acc[i + 1][2 * j]),
                    "+d"(acc[i + 1][2 * j + 1])
                  : "d"(fa[i]), "d"(fa[i + 1]), "d"(fb[j]));
        } else {
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN / 2; ++j)
              mma_8x8x4<BM + PAD, BN + PAD_B>(acc[i][2 * j], acc[i][2 * j + 1], fa[i], fb[j],
                                              &As[buf][kk][0], &Bs[buf][kk][0], out_row(i),
                                              out_col(2 * j));
        }
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        T ra[TM], rb[TN];
        if constexpr (CONTIG) {
          load16(&As[buf][kk][ty * TM], ra);
#pragma unroll
          for (int g = 0; g < NG; ++g) {
            T run[GW];
            load16(&Bs[buf][kk][g * (BN / NG) + tx * GW], run);
#pragma unroll
            for (int q = 0; q < GW; ++q)
              rb[g * GW + q] = run[q];
          }
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
            acc[i][j] = rn_fma(ra[i], rb[j], acc[i][j]);
      }
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
      if (block_ends(k0)) {
        counter.push(acc);
        if (more)
          set_zero(acc);
      }
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
      if (block_ends(k0)) {
        counter.push(acc);
        if (k0 + BK < ke)
          set_zero(acc);
      }
      __syncthreads();
    }
  }
  counter.fold(acc);
  const bool atomic = mode == TileOut::atomic_add, raw = mode == TileOut::partial;
  c += static_cast<i64>(blockIdx.z) * zstride;

  if constexpr (CONTIG) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const i64 r = row0 + ty * TM + i;
      if (r >= m)
        continue;
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        const i64 col = col0 + g * (BN / NG) + tx * GW;
        T run[GW];
#pragma unroll
        for (int q = 0; q < GW; ++q)
          run[q] = acc[i][g * GW + q];
        store_run(c, r, col, crs, ccs, n, run, epi, atomic, raw);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const i64 r = row0 + out_row(i), col = col0 + out_col(j);
        if (r >= m || col >= n)
          continue;
        T* e = c + r * crs + col * ccs;
        if (atomic)
          atomicAdd(e, epi.alpha == T(1) ? acc[i][j] : rn_mul(epi.alpha, acc[i][j]));
        else
          *e = raw ? acc[i][j] : epi(acc[i][j], e);
      }
  }
}

// Thin outputs (n small: GraphSAGE's [N x F] @ [F x 16] and [N x 16] @ [16 x 7]): one thread per
// output row and BN adjacent columns, 128 rows per thread block, so that A, the big operand, is
// read once, coalesced (16 bytes at a time when its rows run along k), staged k-major in shared
// memory and each value used for BN fmas; B's tile is read by all threads at once (a broadcast).
// Block (x, y, z) computes rows [x*128, +128) x columns [y*BN, +BN) over k in [z*k_chunk,
// +k_chunk), with the same per-thread block counter, padding rule (-0 in A, +0 in B past k) and
// output modes as gemm_tiles: the same bits.
constexpr int kThinRows = 128, kThinK = 32;
static_assert(kGemmBlockK % kThinK == 0, "thin k steps never straddle a canonical block");

template <class T, int BN>
__global__ void __launch_bounds__(kThinRows)
    gemm_thin(Mat<T> A, Mat<T> B, T* c, i64 crs, i64 ccs, i64 zstride, i64 m, i64 n, i64 k,
              i64 k_chunk, Epilogue<T> epi, TileOut mode) {
  constexpr int BM = kThinRows, BK = kThinK, NT = kThinRows, W = kPerVec16<T>;
  constexpr int LA = BM * BK / NT, LB = (BK * BN + NT - 1) / NT, VA = LA / W;
  static_assert(BN % W == 0 && LA % W == 0 && NT * W % BK == 0, "whole 16-byte vectors");
  __shared__ T As[BK][BM + 1]; // k-major; the pad spreads a column's stores over the banks
  __shared__ __align__(16) T Bs[BK][BN];
  const int tid = static_cast<int>(threadIdx.x);
  const i64 row0 = static_cast<i64>(blockIdx.x) * BM, col0 = static_cast<i64>(blockIdx.y) * BN;
  const i64 kb = static_cast<i64>(blockIdx.z) * k_chunk;
  const i64 ke = kb + k_chunk < k ? kb + k_chunk : k;
  const bool a_k_fast = A.cs == 1, b_n_fast = B.cs == 1;
  const bool vec_block =
      a_k_fast && A.rs % W == 0 && kb % W == 0 && aligned16(A.data) && row0 + BM <= m;

  T acc[BN];
  set_zero(acc);
  BlockCounter<T[BN]> counter; // over BN outputs

  // A k step's tiles, global memory -> shared memory. A by 16-byte vectors where the whole step
  // lies inside A (thread tid's vectors: row tid / (BK / W) + l * (NT * W / BK), depth kk0),
  // else element-wise in the order that reads memory consecutively across threads.
  auto load_step = [&](i64 k0) {
    if (vec_block && k0 + BK <= ke) {
      constexpr int RS = NT * W / BK; // rows between a thread's vectors
      const int r0 = tid / (BK / W), kk0 = tid % (BK / W) * W;
      const T* p = A.data + (row0 + r0) * A.rs + k0 + kk0;
      const i64 step = RS * A.rs;
#pragma unroll
      for (int l = 0; l < VA; ++l) {
        T v[W];
        load16(p + l * step, v);
#pragma unroll
        for (int q = 0; q < W; ++q)
          As[kk0 + q][r0 + l * RS] = v[q];
      }
    } else {
#pragma unroll 4
      for (int l = 0; l < LA; ++l) {
        const int idx = tid + l * NT;
        const int r = a_k_fast ? idx / BK : idx % BM, kk = a_k_fast ? idx % BK : idx / BM;
        const i64 gr = row0 + r, gk = k0 + kk;
        As[kk][r] = (gr < m && gk < ke) ? A.data[gr * A.rs + gk * A.cs] : -T(0);
      }
    }
#pragma unroll
    for (int l = 0; l < LB; ++l) {
      const int idx = tid + l * NT;
      const int cc = b_n_fast ? idx % BN : idx / BK, kk = b_n_fast ? idx / BN : idx % BK;
      const i64 gk = k0 + kk, gc = col0 + cc;
      if (idx < BK * BN)
        Bs[kk][cc] = (gk < ke && gc < n) ? B.data[gk * B.rs + gc * B.cs] : T(0);
    }
  };

  for (i64 k0 = kb; k0 < ke; k0 += BK) {
    load_step(k0);
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < BK; ++kk) {
      const T a = As[kk][tid];
      T rb[BN];
      load16(&Bs[kk][0], rb);
#pragma unroll
      for (int j = 0; j < BN; ++j)
        acc[j] = rn_fma(a, rb[j], acc[j]);
    }
    // A canonical block ends with this step at a multiple of its length or at the chunk's end.
    if ((k0 + BK - kb) % kGemmBlockK == 0 || k0 + BK >= ke) {
      counter.push(acc);
      if (k0 + BK < ke)
        set_zero(acc);
    }
    __syncthreads();
  }
  counter.fold(acc);

  const i64 r = row0 + tid;
  if (r >= m)
    return;
  c += static_cast<i64>(blockIdx.z) * zstride;
  store_run(c, r, col0, crs, ccs, n, acc, epi, mode == TileOut::atomic_add,
            mode == TileOut::partial);
}

// Finishes a product whose k was cut into `groups` chunks: element e's chunk sums, part[z * m * n
// + e] for z ascending, are combined by the block counter (the canonical tree, since every chunk
// but the last is a complete aligned subtree), then the epilogue writes c.
template <class T>
__global__ void gemm_combine(const T* part, i64 groups, T* c, i64 crs, i64 ccs, i64 m, i64 n,
                             Epilogue<T> epi) {
  const i64 total = m * n;
  for (i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<i64>(gridDim.x) * blockDim.x) {
    T stack[40]; // levels: groups < 2^40
    T v = T(0);
    for (i64 z = 0; z < groups; ++z) {
      v = part[z * total + idx];
      const int top = gemm_store_level(z);
      for (int l = 0; l < top; ++l)
        v = rn_add(stack[l], v);
      stack[top] = v;
    }
    for (int l = gemm_store_level(groups - 1) + 1; l < 40 && (groups >> l) != 0; ++l)
      if ((groups >> l) & 1)
        v = rn_add(stack[l], v);
    T* e = c + (idx / n) * crs + (idx % n) * ccs;
    *e = epi(v, e);
  }
}

// c = epi(+0, c) everywhere: k == 0 or alpha == 0, where neither a nor b is read.
template <class T>
__global__ void gemm_scale(T* c, i64 crs, i64 ccs, i64 m, i64 n, Epilogue<T> epi) {
  const i64 total = m * n;
  for (i64 idx = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<i64>(gridDim.x) * blockDim.x) {
    T* e = c + (idx / n) * crs + (idx % n) * ccs;
    *e = epi(T(0), e);
  }
}

} // namespace samebits::detail::cuda_gemm

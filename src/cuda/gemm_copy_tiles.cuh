// The wide float GEMM kernel that copies its tiles straight from global into shared memory
// (cp.async on sm_80 and later), several k steps in flight, so that the threads' instruction
// stream is the fmas and the shared-memory loads that feed them: no registers hold the next step,
// no transposing stores. Same canonical order, padding rule, block counter and output modes as
// gemm_tiles (src/cuda/gemm_kernels.cuh), hence the same bits; src/cuda/gemm.cu launches it for
// float wide tiles whose A is not read m-fast.
#pragma once
#include "cuda/gemm_kernels.cuh"

namespace samebits::detail::cuda_gemm {

// BM x 128 outputs per block of 2 BM threads (the launch's BM is 128), BK k a step, S steps in
// dynamic shared memory (copy_tiles_smem bytes). A's tile is row-major (BK k of a row adjacent,
// rows padded to kCopyRowA floats), B's k-major, as in memory: a 16-byte copy moves 4 elements of a
// row of A or of B unchanged. Thread (tx, ty) = (tid % 16, tid / 16) owns rows ty + i BM / 8
// (i < 8) and columns 64 g + 4 tx + q (g < 2, q < 4): the two rows a warp reads at one k group
// are adjacent, and their padded stride puts the two 16-byte loads on disjoint banks.
struct CopyFloatTiles {
  static constexpr int BM = 128, BN = 128, TM = 8, TN = 8;
};
// BM rows (the launch's 128, or more in bench/gemm_variant_probe.cu) by BN columns: one thread
// per 8 x 8 outputs.
template <int BM>
constexpr int kCopyThreadsOf = (BM / CopyFloatTiles::TM) *
                               (CopyFloatTiles::BN / CopyFloatTiles::TN);
constexpr int kCopyThreads = kCopyThreadsOf<CopyFloatTiles::BM>;
// A row of A's tile: BK floats, plus 4 where BK is a multiple of 32 (else rows one apart would
// start on the same bank).
template <int BK> constexpr int kCopyRowA = BK % 32 == 0 ? BK + 4 : BK;
template <int BK, int S, int BM = CopyFloatTiles::BM> constexpr int copy_tiles_smem() {
  return S * (BM * kCopyRowA<BK> + BK * CopyFloatTiles::BN) * static_cast<int>(sizeof(float));
}
// The step depth and the steps in flight that gemm.cu launches: 16 k and 3, 48 KB, what every GPU
// gives a block without opting in (sm_86 and sm_89 allow at most 99 KB, too little for 32 k and 3
// stages). On an H100 it ran 4096^3 as fast as 32 k with 3 stages (3.417 against 3.405-3.429 ms,
// bench/results/partial-run147-h100).
// It runs one block an SM (209 registers a thread). Two (launch bounds 256 x 2: 128 registers,
// no spills, 4 warps a scheduler instead of 2) ran slower on an H100, 3.51 against 3.39-3.42 ms:
// the issue rate stayed at 0.71 instructions a cycle a scheduler, set by dispatch stalls rather
// than by warps waiting (bench/results/partial-run147-h100, calls 5, 7 and 8).
constexpr int kCopyK = 16, kCopyStages = 3;
static_assert(copy_tiles_smem<kCopyK, kCopyStages>() <= 48 * 1024,
              "the launch's shared memory needs no opt-in");

// dst[0..4) = src[0..4) as one 16-byte copy that lands in shared memory asynchronously (cp.async,
// committed and waited on per group), or a plain 16-byte load and store before sm_80.
__device__ __forceinline__ void copy16_async(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#else
  float v[4];
  load16(src, v);
  store16(dst, v);
#endif
}
__device__ __forceinline__ void copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Block (x, y, z) computes rows [x*BM, +BM) x columns [y*128, +128) over k in [z*k_chunk,
// +k_chunk), exactly as gemm_tiles does (see there for the chunk, the counter and `mode`).
template <int BK, int S, int BM = CopyFloatTiles::BM>
__global__ void __launch_bounds__(kCopyThreadsOf<BM>, 1)
    gemm_copy_tiles(Mat<float> A, Mat<float> B, float* c, i64 crs, i64 ccs, i64 zstride, i64 m,
                    i64 n, i64 k, i64 k_chunk, Epilogue<float> epi, TileOut mode) {
  using Cfg = CopyFloatTiles;
  constexpr int BN = Cfg::BN, TM = Cfg::TM, TN = Cfg::TN, RA = kCopyRowA<BK>;
  constexpr int NT = kCopyThreadsOf<BM>, RY = BM / TM, RX = BN / TN;
  constexpr int GW = TN / 2; // a thread's columns: two runs of GW, BN / 2 apart
  static_assert(kGemmBlockK % BK == 0, "k steps never straddle a canonical block");
  static_assert(BM * BK % (4 * NT) == 0 && BK * BN % (4 * NT) == 0, "whole copies per thread");
  static_assert(S >= 2, "a step in flight while one is read");
  extern __shared__ __align__(16) float copy_smem[];
  auto As = reinterpret_cast<float(*)[BM][RA]>(copy_smem);
  auto Bs = reinterpret_cast<float(*)[BK][BN]>(copy_smem + S * BM * RA);
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % RX, ty = tid / RX;
  const i64 row0 = static_cast<i64>(blockIdx.x) * BM, col0 = static_cast<i64>(blockIdx.y) * BN;
  const i64 kb = static_cast<i64>(blockIdx.z) * k_chunk;
  const i64 ke = kb + k_chunk < k ? kb + k_chunk : k;
  const int steps = static_cast<int>((ke - kb + BK - 1) / BK);
  // Whole steps by 16-byte copies where A's rows and B's run along memory, aligned, and the tile
  // lies inside m and n; the other steps (and blocks) load element by element.
  const bool copy_block = A.cs == 1 && B.cs == 1 && A.rs % 4 == 0 && B.rs % 4 == 0 && kb % 4 == 0 &&
                          aligned16(A.data) && aligned16(B.data) && row0 + BM <= m &&
                          col0 + BN <= n;
  // This thread's copies: CA of A (row, 4 k) and CB of B (k, 4 columns), at the same places of
  // every step; the sources of the next step issued, advanced by a step after each issue (steps
  // are issued in order), and the destinations in stage 0.
  constexpr int CA = BM * BK / 4 / NT, CB = BK * BN / 4 / NT;
  constexpr int A_ROWS_APART = NT / (BK / 4), B_KS_APART = NT / (BN / 4);
  const float* a_next = A.data + (row0 + tid / (BK / 4)) * A.rs + kb + tid % (BK / 4) * 4;
  const float* b_next = B.data + (kb + tid / (BN / 4)) * B.rs + col0 + tid % (BN / 4) * 4;
  const i64 a_apart = A_ROWS_APART * A.rs, b_apart = B_KS_APART * B.rs, b_step = BK * B.rs;
  float* const a_dst = &As[0][tid / (BK / 4)][tid % (BK / 4) * 4];
  float* const b_dst = &Bs[0][tid / (BN / 4)][tid % (BN / 4) * 4];

  // Step t's tiles into stage st: copies in flight, or loads and stores (-0 in A and +0 in B past
  // k, as gemm_tiles pads).
  auto issue = [&](int t, int st) {
    const i64 k0 = kb + static_cast<i64>(t) * BK;
    if (copy_block && k0 + BK <= ke) {
#pragma unroll
      for (int l = 0; l < CA; ++l)
        copy16_async(a_dst + st * (BM * RA) + l * A_ROWS_APART * RA, a_next + l * a_apart);
#pragma unroll
      for (int l = 0; l < CB; ++l)
        copy16_async(b_dst + st * (BK * BN) + l * B_KS_APART * BN, b_next + l * b_apart);
      a_next += BK;
      b_next += b_step;
      return;
    }
    const bool a_k_fast = A.cs == 1, b_n_fast = B.cs == 1;
    for (int idx = tid; idx < BM * BK; idx += NT) {
      const int r = a_k_fast ? idx / BK : idx % BM, kk = a_k_fast ? idx % BK : idx / BM;
      const i64 gr = row0 + r, gk = k0 + kk;
      As[st][r][kk] = gr < m && gk < ke ? A.data[gr * A.rs + gk * A.cs] : -0.0f;
    }
    for (int idx = tid; idx < BK * BN; idx += NT) {
      const int cc = b_n_fast ? idx % BN : idx / BK, kk = b_n_fast ? idx / BN : idx % BK;
      const i64 gk = k0 + kk, gc = col0 + cc;
      Bs[st][kk][cc] = gk < ke && gc < n ? B.data[gk * B.rs + gc * B.cs] : 0.0f;
    }
  };

  float acc[TM][TN];
  set_zero(acc);
  BlockCounter<float[TM][TN]> counter;

  // The products of one step from stage st, each output's chain in ascending k: A's 4 k of each
  // row at once, then B's row at each of those k. Even rows walk their columns backwards, so that
  // a row's first fma reads the b its predecessor read last: ptxas then gives the fmas' operands
  // fewer register-bank conflicts (0.333 extra register reads per fma in the sm_90 SASS,
  // bench/sass_bank_conflicts.py; 0.346 with the odd rows backwards, 0.385 with every row
  // forwards), and those conflicts set this loop's issue rate (H100, 4096^3: 3.337-3.341 ms
  // against 3.363 with the odd rows backwards and 3.423 forwards; bench/results/partial-run148-h100
  // and partial-run147-h100 call 9). No chain changes.
  auto compute = [&](int st) {
#pragma unroll
    for (int kq = 0; kq < BK; kq += 4) {
      float a[TM][4];
#pragma unroll
      for (int i = 0; i < TM; ++i)
        load16(&As[st][ty + i * RY][kq], a[i]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float b[TN], run[GW];
        load16(&Bs[st][kq + q][tx * GW], run);
#pragma unroll
        for (int j = 0; j < GW; ++j)
          b[j] = run[j];
        load16(&Bs[st][kq + q][BN / 2 + tx * GW], run);
#pragma unroll
        for (int j = 0; j < GW; ++j)
          b[GW + j] = run[j];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int jj = 0; jj < TN; ++jj) {
            const int j = i % 2 == 1 ? jj : TN - 1 - jj;
            acc[i][j] = rn_fma(a[i][q], b[j], acc[i][j]);
          }
      }
    }
  };

  // Steps 0 .. S-2 in flight before the loop; step t + S - 1 issued into the stage that step t - 1
  // was read from, once every thread is past it (the barrier). One group committed per step, empty
  // or not, so that waiting for all but S - 2 groups means step t has landed.
#pragma unroll
  for (int t = 0; t < S - 1; ++t) {
    if (t < steps)
      issue(t, t);
    copy_commit();
  }
  int read_st = 0, write_st = S - 1; // t % S and (t + S - 1) % S
  for (int t = 0; t < steps; ++t) {
    copy_wait<S - 2>();
    __syncthreads();
    if (t + S - 1 < steps)
      issue(t + S - 1, write_st);
    copy_commit();
    compute(read_st);
    write_st = read_st;
    read_st = read_st + 1 == S ? 0 : read_st + 1;
    // A canonical block ends every kGemmBlockK / BK steps (kb is a multiple of it) and at the
    // chunk's end.
    if ((t + 1) % (kGemmBlockK / BK) == 0 || t + 1 == steps) {
      counter.push(acc);
      if (t + 1 < steps)
        set_zero(acc);
    }
  }
  counter.fold(acc);

  const bool atomic = mode == TileOut::atomic_add, raw = mode == TileOut::partial;
  c += static_cast<i64>(blockIdx.z) * zstride;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const i64 r = row0 + ty + i * RY;
    if (r >= m)
      continue;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      float run[GW];
#pragma unroll
      for (int q = 0; q < GW; ++q)
        run[q] = acc[i][g * GW + q];
      store_run(c, r, col0 + g * (BN / 2) + tx * GW, crs, ccs, n, run, epi, atomic, raw);
    }
  }
}

} // namespace samebits::detail::cuda_gemm

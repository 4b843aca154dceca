// The micro-kernel templates of the CPU gemm, written once over a vector type `Ops` (load,
// store, broadcast, fma, add of one vector) and instantiated by each instruction-set file
// (gemm_kernels_*.cpp). Ops must have internal linkage (an anonymous namespace) in each file, so
// that the instantiations compiled with different flags never meet at link time; for the same
// reason nothing here calls the standard library.
#pragma once
#include "cpu/gemm_kernels.hpp"

namespace samebits::detail::cpu_gemm {

template <class Ops> struct Micro {
  using T = typename Ops::T;
  using V = typename Ops::V;
  static constexpr std::int64_t W = Ops::kLanes;
  static constexpr std::int64_t NR = 2 * W;

  // gemm_store_level of src/ops/gemm.hpp, here so that no inline function shared with other files
  // is compiled with this file's flags.
  static int store_level(std::int64_t q) {
    int l = 0;
    for (; q & 1; q >>= 1)
      ++l;
    return l;
  }

  static void push_block(const T* ap, AWalk w, const T* bp, std::int64_t mc_pad,
                         std::int64_t nc_pad, std::int64_t kc, std::int64_t q, T* stack,
                         std::int64_t level_stride) {
    const std::int64_t mt = mc_pad / kMR, nt = nc_pad / NR;
    const int top = store_level(q);
    // b panels outermost, so that one stays in L1 while every row panel passes it.
    for (std::int64_t jt = 0; jt < nt; ++jt) {
      const T* bpan = bp + jt * kc * NR;
      for (std::int64_t it = 0; it < mt; ++it) {
        const T* apan = ap + it * w.panel;
        // 12 accumulators: 6 rows x 2 vectors, each an fma chain from +0 along the block.
        V c[kMR][2];
#pragma GCC unroll 6
        for (int i = 0; i < kMR; ++i)
          c[i][0] = c[i][1] = Ops::zero();
        for (std::int64_t p = 0; p < kc; ++p) {
          const V b0 = Ops::load(bpan + p * NR), b1 = Ops::load(bpan + p * NR + W);
          const T* a = apan + p * w.step;
#pragma GCC unroll 6
          for (int i = 0; i < kMR; ++i) {
            const V ai = Ops::broadcast(a[i * w.row]);
            c[i][0] = Ops::fma(ai, b0, c[i][0]);
            c[i][1] = Ops::fma(ai, b1, c[i][1]);
          }
        }
        // The binary counter: merge with the levels below `top`, store at `top`.
        T* tile = stack + (it * nt + jt) * kMR * NR;
        for (int l = 0; l < top; ++l) {
          const T* e = tile + l * level_stride;
#pragma GCC unroll 6
          for (int i = 0; i < kMR; ++i) {
            c[i][0] = Ops::add(Ops::load(e + i * NR), c[i][0]);
            c[i][1] = Ops::add(Ops::load(e + i * NR + W), c[i][1]);
          }
        }
        T* e = tile + top * level_stride;
#pragma GCC unroll 6
        for (int i = 0; i < kMR; ++i) {
          Ops::store(e + i * NR, c[i][0]);
          Ops::store(e + i * NR + W, c[i][1]);
        }
      }
    }
  }

  // RN rows x W lanes of outputs, the whole k: blocks of KB as fma chains, combined by the binary
  // counter in a stack of vectors (levels below 48: nb < 2^48).
  template <int RN>
  static void small_rows(const T* x, const T* y, SmallWalk w, std::int64_t k, T* out) {
    V stack[48][RN];
    const std::int64_t nb = (k + kBlockK - 1) / kBlockK;
    V acc[RN];
    for (int r = 0; r < RN; ++r)
      acc[r] = Ops::zero();
    for (std::int64_t q = 0; q < nb; ++q) {
      for (int r = 0; r < RN; ++r)
        acc[r] = Ops::zero();
      const std::int64_t pe = (q + 1) * kBlockK < k ? (q + 1) * kBlockK : k;
      for (std::int64_t p = q * kBlockK; p < pe; ++p) {
        const V xv = Ops::load(x + p * w.xs);
        const T* yp = y + p * w.ys;
#pragma GCC unroll 8
        for (int r = 0; r < RN; ++r)
          acc[r] = Ops::fma(xv, Ops::broadcast(yp[r * w.yr]), acc[r]);
      }
      const int top = store_level(q);
      for (int l = 0; l < top; ++l)
        for (int r = 0; r < RN; ++r)
          acc[r] = Ops::add(stack[l][r], acc[r]);
      for (int r = 0; r < RN; ++r)
        stack[top][r] = acc[r];
    }
    // acc holds the last value stored (level ctz(nb)); add the higher set bits of nb (k == 0:
    // acc stays +0).
    for (int l = nb > 0 ? store_level(nb - 1) + 1 : 64; l < 63 && (nb >> l) != 0; ++l)
      if ((nb >> l) & 1)
        for (int r = 0; r < RN; ++r)
          acc[r] = Ops::add(stack[l][r], acc[r]);
    for (int r = 0; r < RN; ++r)
      Ops::store(out + r * W, acc[r]);
  }

  static void small(int rows, const T* x, const T* y, SmallWalk w, std::int64_t k, T* out) {
    using Kernel = void (*)(const T*, const T*, SmallWalk, std::int64_t, T*);
    static constexpr Kernel kernels[] = {small_rows<1>, small_rows<2>, small_rows<3>,
                                         small_rows<4>, small_rows<5>, small_rows<6>,
                                         small_rows<7>, small_rows<8>};
    kernels[rows - 1](x, y, w, k, out);
  }

  static KernelSet<T> set() {
    return {NR, W, push_block, small};
  }
};

} // namespace samebits::detail::cpu_gemm

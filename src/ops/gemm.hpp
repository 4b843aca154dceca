// Arguments of gemm as its variants receive them (already validated), plus the epilogue rule of
// the canonical order (include/samebits/ops/gemm.hpp) shared by the CPU and the CUDA code.
#pragma once
#include "ops/host_device.hpp"
#include "samebits/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <string>

namespace samebits::detail {

// A 2-D operand after op(): element (r, c) lives at data[r * rs + c * cs].
template <class T> struct Mat {
  const T* data = nullptr;
  std::int64_t rs = 0; // row stride, elements
  std::int64_t cs = 0; // column stride, elements
  SAMEBITS_HD const T& operator()(std::int64_t r, std::int64_t c) const {
    return data[r * rs + c * cs];
  }
};

struct GemmArgs {
  TensorView a; // op(a) already applied: [m, k] (a transposed view when trans_a)
  TensorView b; // op(b) already applied: [k, n]
  TensorView c; // [m, n]
  double alpha = 1;
  double beta = 0;
  std::int64_t m() const { return c.shape[0]; }
  std::int64_t n() const { return c.shape[1]; }
  std::int64_t k() const { return a.shape[1]; }
  template <class T> Mat<T> mat_a() const {
    return {static_cast<const T*>(a.data), a.strides[0], a.strides[1]};
  }
  template <class T> Mat<T> mat_b() const {
    return {static_cast<const T*>(b.data), b.strides[0], b.strides[1]};
  }
};

// The canonical order's k blocks (include/samebits/ops/gemm.hpp): block q covers k in
// [q * kGemmBlockK, (q + 1) * kGemmBlockK), the last one possibly shorter.
constexpr std::int64_t kGemmBlockK = 256;
SAMEBITS_HD constexpr std::int64_t gemm_blocks(std::int64_t k) {
  return (k + kGemmBlockK - 1) / kGemmBlockK;
}

// One rounded product, sum or fused multiply-add, spelled out for the device so that no compiler
// flag can fuse or split them (the host build has -ffp-contract=off; std::fma is correctly
// rounded wherever it runs, in hardware or in libm).
SAMEBITS_HD inline float rn_mul(float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(x, y);
#else
  return x * y;
#endif
}
SAMEBITS_HD inline double rn_mul(double x, double y) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(x, y);
#else
  return x * y;
#endif
}
SAMEBITS_HD inline float rn_add(float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(x, y);
#else
  return x + y;
#endif
}
SAMEBITS_HD inline double rn_add(double x, double y) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(x, y);
#else
  return x + y;
#endif
}
SAMEBITS_HD inline float rn_fma(float x, float y, float z) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(x, y, z);
#else
  return std::fma(x, y, z);
#endif
}
SAMEBITS_HD inline double rn_fma(double x, double y, double z) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(x, y, z);
#else
  return std::fma(x, y, z);
#endif
}

// The tree over blocks as a binary counter, the form every kernel uses. Block partials are
// pushed in ascending block order; push number q (0-based) is merged with the entries of the
// levels where q has trailing one bits (entry + value: the earlier blocks on the left) and the
// result is stored at the first level where q has a zero bit. After nb pushes, the last value
// stored sits at level ctz(nb); adding onto it the entries of the higher set bits of nb, lowest
// first, gives the tree of include/samebits/ops/gemm.hpp. Why: the largest-power-of-two split
// makes every aligned run of 2^l blocks a subtree, and that is what level l holds. It also means
// that any aligned run of 2^d blocks can be summed on its own (by one GPU thread block) and those
// sums combined by the same counter.
//
// The level at which push number q stores: the number of trailing one bits of q.
SAMEBITS_HD inline int gemm_store_level(std::int64_t q) {
  int l = 0;
  for (; q & 1; q >>= 1)
    ++l;
  return l;
}

// The epilogue of the canonical order: c_new from acc and c_old (read only when beta != 0).
// Multiplications and additions are separate roundings (the build forbids contraction).
template <class T> struct Epilogue {
  T alpha;
  T beta;
  SAMEBITS_HD T operator()(T acc, const T* c_old) const {
    if (alpha == T(0)) {
      if (beta == T(0))
        return T(0);
      return beta == T(1) ? *c_old : rn_mul(beta, *c_old);
    }
    const T t = alpha == T(1) ? acc : rn_mul(alpha, acc);
    if (beta == T(0))
      return t;
    const T u = beta == T(1) ? *c_old : rn_mul(beta, *c_old);
    return rn_add(t, u);
  }
};

// --- launch choice -------------------------------------------------------------------------

// The instruction set of the CPU micro-kernels. Each gives the same bits (an FMA is one rounding
// in hardware and in libm's std::fma); automatic takes the widest the CPU has.
enum class CpuGemmIsa : std::uint8_t { automatic, generic, avx2, avx512 };
// Tile shapes of the CUDA kernels (src/cuda/gemm_kernels.cuh; float wide tiles whose A is not
// read m-fast in src/cuda/gemm_copy_tiles.cuh): wide 128 x 128 outputs per thread block, narrow
// 32 x 16, deep 16 x 16 with 128-deep k steps, thin 128 rows x 8, 16 or 32 columns (one thread
// per row; the smallest of the three that covers n, 32 for larger n).
enum class GemmTiles : std::uint8_t { automatic, wide, narrow, deep, thin };

// How float64 wide tiles multiply (GemmTuning::f64_mma).
enum class GemmF64Mma : std::uint8_t { automatic, m8n8k4, off };

// Launch tuning of gemm (core/tuning.hpp: set_tuning / TuningGuard). Every value gives the same
// bits at portable; the tests run each one.
struct GemmTuning {
  GemmTiles tiles = GemmTiles::automatic;
  // k blocks per CUDA thread block (rounded down to a power of two, at most
  // kGemmMaxGroupBlocks); 0 picks by shape.
  std::int64_t group_blocks = 0;
  CpuGemmIsa cpu_isa = CpuGemmIsa::automatic;
  // float64 wide tiles on the FP64 tensor cores where the GPU has them (sm_80 and later):
  // automatic takes the widest instruction the GPU has (m16n8k4 on sm_90, m8n8k4 before), m8n8k4
  // that one on any of them, off the CUDA cores. Same bits (src/cuda/gemm_kernels.cuh).
  GemmF64Mma f64_mma = GemmF64Mma::automatic;
};

// Whether this CPU runs that micro-kernel set (automatic and generic: always), and the name of
// the set the next CPU gemm uses (src/cpu/gemm.cpp).
bool cpu_gemm_has(CpuGemmIsa isa);
const char* cpu_gemm_isa_name();

constexpr std::int64_t kGemmMaxGroupBlocks = 256; // 2^8: the CUDA threads' stacks hold 9 levels
// Outputs at most this wide and at least 132 x 128 rows take the thin tiles (automatic tuning).
constexpr std::int64_t kGemmThinMaxCols = 32;

// How the CUDA portable kernel runs a product. A thread block computes one output tile over one
// group of group_blocks consecutive k blocks (an aligned subtree of the canonical tree); with
// groups > 1 the groups' sums go to scratch (groups x m x n) and a second kernel combines them
// with the same tree, then applies the epilogue.
struct GemmLaunch {
  GemmTiles tiles = GemmTiles::narrow;
  std::int64_t tile_rows = 0, tile_cols = 0;
  std::int64_t group_blocks = 1, groups = 1;
  // GemmTuning::f64_mma for float64 wide tiles, off for everything else
  GemmF64Mma f64_mma = GemmF64Mma::off;
  std::size_t scratch_bytes(std::int64_t m, std::int64_t n, std::size_t elem) const {
    return groups > 1 ? static_cast<std::size_t>(groups * m * n) * elem : 0;
  }
  std::string describe() const;
};

// The kernel choice of the CUDA portable gemm: a pure function of the shape, the element size and
// the tuning (never of the GPU), so that it can be tested and explained on any host. It changes
// how the work is cut, never the bits.
GemmLaunch choose_gemm_launch(std::int64_t m, std::int64_t n, std::int64_t k, std::size_t elem,
                              const GemmTuning& t);

} // namespace samebits::detail

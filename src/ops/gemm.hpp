// Arguments of gemm as its variants receive them (already validated), plus the epilogue rule of
// the canonical order (include/samebits/ops/gemm.hpp) shared by the CPU and the CUDA code.
#pragma once
#include "ops/host_device.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>

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

// One rounded product and one rounded sum, spelled out for the device so that no compiler flag
// can fuse them (the host build has -ffp-contract=off).
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

// Test hook (CUDA builds only, src/cuda/gemm.cu): the tile shape of cuda.tiled and
// cuda.split_k_atomic. 0 picks by problem size (the default), 1 forces 128x128 tiles, 2 forces
// 32x16 tiles, 3 forces the long-k shape (cuda.tiled: 8x16 outputs per block, a thread per
// output; split-K: 16x16 tiles with 128-deep k steps), 4 forces cuda.tiled's thin kernel (a
// thread per few rows and 16 columns). Results of cuda.tiled are the same bits whatever the choice.
void set_cuda_gemm_tiles(int which);

} // namespace samebits::detail

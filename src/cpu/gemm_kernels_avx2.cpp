// The AVX2 + FMA set of the CPU gemm's micro-kernels (this file is compiled with -mavx2 -mfma
// on x86-64, see CMakeLists.txt; gemm.cpp runs it only where the CPU has both). 6 x 16 float or
// 6 x 8 double micro-tiles: 12 accumulators in ymm registers.
#include "cpu/gemm_micro.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace samebits::detail::cpu_gemm {

namespace {

struct OpsF32 {
  using T = float;
  using V = __m256;
  static constexpr std::int64_t kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
};

struct OpsF64 {
  using T = double;
  using V = __m256d;
  static constexpr std::int64_t kLanes = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V broadcast(double x) { return _mm256_set1_pd(x); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V x) { _mm256_storeu_pd(p, x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
};

} // namespace

const Isa* isa_avx2() {
  static const Isa isa{"avx2+fma", Micro<OpsF32>::set(), Micro<OpsF64>::set()};
  return &isa;
}

} // namespace samebits::detail::cpu_gemm

#else

namespace samebits::detail::cpu_gemm {
const Isa* isa_avx2() {
  return nullptr;
}
} // namespace samebits::detail::cpu_gemm

#endif

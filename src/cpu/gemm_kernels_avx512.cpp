// The AVX-512 set of the CPU gemm's micro-kernels (this file is compiled with -mavx512f
// on x86-64, see CMakeLists.txt; gemm.cpp runs it only where the CPU has it). 6 x 32 float or
// 6 x 16 double micro-tiles: 12 accumulators in zmm registers.
#include "cpu/gemm_micro.hpp"

#if defined(__AVX512F__)
#include <immintrin.h>

namespace samebits::detail::cpu_gemm {

namespace {

struct OpsF32 {
  using T = float;
  using V = __m512;
  static constexpr std::int64_t kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
};

struct OpsF64 {
  using T = double;
  using V = __m512d;
  static constexpr std::int64_t kLanes = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V broadcast(double x) { return _mm512_set1_pd(x); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V x) { _mm512_storeu_pd(p, x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
};

} // namespace

const Isa* isa_avx512() {
  static const Isa isa{"avx512f", Micro<OpsF32>::set(), Micro<OpsF64>::set()};
  return &isa;
}

} // namespace samebits::detail::cpu_gemm

#else

namespace samebits::detail::cpu_gemm {
const Isa* isa_avx512() {
  return nullptr;
}
} // namespace samebits::detail::cpu_gemm

#endif

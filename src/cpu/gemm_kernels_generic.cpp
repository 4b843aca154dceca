// The generic set of the CPU gemm's micro-kernels: plain arrays of lanes and std::fma, which is
// correctly rounded on every CPU (a hardware FMA where the compiler may use one, libm's exact
// emulation otherwise), so it gives the bits of the vector sets, slowly. It runs where the CPU
// has neither AVX2 with FMA nor AVX-512.
#include "cpu/gemm_micro.hpp"

#include <cmath>

namespace samebits::detail::cpu_gemm {

namespace {

template <class Elem, int L> struct Lanes { Elem v[L]; };

template <class Elem> struct GenericOps {
  using T = Elem;
  static constexpr std::int64_t kLanes = 32 / sizeof(Elem); // the AVX2 tile shape
  using V = Lanes<Elem, kLanes>;
  static V zero() { return broadcast(Elem(0)); }
  static V broadcast(Elem x) {
    V r;
    for (int l = 0; l < kLanes; ++l)
      r.v[l] = x;
    return r;
  }
  static V load(const Elem* p) {
    V r;
    for (int l = 0; l < kLanes; ++l)
      r.v[l] = p[l];
    return r;
  }
  static void store(Elem* p, const V& x) {
    for (int l = 0; l < kLanes; ++l)
      p[l] = x.v[l];
  }
  static V fma(const V& a, const V& b, const V& c) {
    V r;
    for (int l = 0; l < kLanes; ++l)
      r.v[l] = std::fma(a.v[l], b.v[l], c.v[l]);
    return r;
  }
  static V add(const V& a, const V& b) {
    V r;
    for (int l = 0; l < kLanes; ++l)
      r.v[l] = a.v[l] + b.v[l];
    return r;
  }
};

} // namespace

const Isa* isa_generic() {
  static const Isa isa{"generic (std::fma)", Micro<GenericOps<float>>::set(),
                       Micro<GenericOps<double>>::set()};
  return &isa;
}

} // namespace samebits::detail::cpu_gemm

// exp and log built only from correctly rounded +, -, *, / and exact bit manipulation, each in
// one fixed order, so that host code and CUDA device code get the same bits (libm's expf/logf
// and CUDA's differ in the last bit). Used by the portable log-softmax and NLL of the GraphSAGE
// experiment. Host code must be compiled with -ffp-contract=off and CUDA code with --fmad=false,
// so that no a*b+c below is fused on one side only.
//
// Accuracy: a few ulp over the whole range (float: Taylor degree 8 after reduction to
// |r| <= ln2/2; double: degree 13). Special values: exp(NaN) = NaN, exp(+inf) = +inf,
// exp(-inf) = 0, overflow gives +inf and underflow rounds into the subnormals once;
// log(x < 0) = NaN, log(0) = -inf, log(+inf) = +inf, subnormal inputs are exact-scaled first.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__CUDACC__)
#define SAMEBITS_PM_HD __host__ __device__ __forceinline__
#else
#define SAMEBITS_PM_HD inline
#endif

namespace samebits::nn::pm {

template <class T> struct Traits;
template <> struct Traits<float> {
  using Bits = std::uint32_t;
  static constexpr int mantissa_bits = 23;
  static constexpr int bias = 127;
  static constexpr int exp_terms = 8; // Taylor degree of exp on |r| <= ln2/2
  static constexpr int log_terms = 5; // terms of the atanh series in s = f^2 <= 0.0295
  // ln2 split so that k * ln2_hi is exact for |k| < 2^11.
  static constexpr float ln2_hi = 0.693145751953125f;
  static constexpr float ln2_lo = 1.42860676533018704e-06f;
  static constexpr float log2e = 1.44269504088896341f;
  static constexpr float sqrt2 = 1.41421356237309505f;
  static constexpr float exp_max = 88.7228394f;  // above: +inf
  static constexpr float exp_min = -103.972084f; // below: 0
};
template <> struct Traits<double> {
  using Bits = std::uint64_t;
  static constexpr int mantissa_bits = 52;
  static constexpr int bias = 1023;
  static constexpr int exp_terms = 13;
  static constexpr int log_terms = 11;
  static constexpr double ln2_hi = 6.93147180369123816490e-01;
  static constexpr double ln2_lo = 1.90821492927058770002e-10;
  static constexpr double log2e = 1.44269504088896338700e+00;
  static constexpr double sqrt2 = 1.41421356237309514547e+00;
  static constexpr double exp_max = 709.782712893383973096;
  static constexpr double exp_min = -745.133219101941108420;
};

template <class T> SAMEBITS_PM_HD typename Traits<T>::Bits to_bits(T x) {
  typename Traits<T>::Bits b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
template <class T> SAMEBITS_PM_HD T from_bits(typename Traits<T>::Bits b) {
  T x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// 2^j for j in the normal exponent range, exact.
template <class T> SAMEBITS_PM_HD T pow2(int j) {
  using Bits = typename Traits<T>::Bits;
  return from_bits<T>(static_cast<Bits>(j + Traits<T>::bias) << Traits<T>::mantissa_bits);
}

// floor without libm: exact for every T value (values >= 2^mantissa_bits are integers already).
template <class T> SAMEBITS_PM_HD T floor_exact(T x) {
  constexpr T big = T(std::int64_t{1} << Traits<T>::mantissa_bits);
  if (!(x < big && x > -big))
    return x;
  const T t = static_cast<T>(static_cast<std::int64_t>(x)); // truncation toward zero, exact
  return t > x ? t - T(1) : t;
}

template <class T> SAMEBITS_PM_HD T exp(T x) {
  using Tr = Traits<T>;
  if (x != x)
    return x;
  if (x > Tr::exp_max)
    return std::numeric_limits<T>::infinity();
  if (x < Tr::exp_min)
    return T(0);
  // x = k ln2 + r, |r| <= ln2/2 (plus rounding); k * ln2_hi is exact.
  const T k = floor_exact(x * Tr::log2e + T(0.5));
  const T r = (x - k * Tr::ln2_hi) - k * Tr::ln2_lo;
  // Taylor polynomial by Horner: 1 + r (1 + r/2 (1 + r/3 (...))), 1/i rounded to T once
  // (a correctly rounded division, whether the compiler folds it or not).
  T p = T(1);
  for (int i = Tr::exp_terms; i >= 1; --i)
    p = T(1) + (r * p) * (T(1) / T(i));
  // p * 2^k in two exact-range factors, so that a subnormal result is rounded only once.
  const int ki = static_cast<int>(k);
  const int k1 = ki / 2;
  return (p * pow2<T>(k1)) * pow2<T>(ki - k1);
}

template <class T> SAMEBITS_PM_HD T log(T x) {
  using Tr = Traits<T>;
  using Bits = typename Tr::Bits;
  if (x != x)
    return x;
  if (x < T(0))
    return std::numeric_limits<T>::quiet_NaN();
  if (x == T(0))
    return -std::numeric_limits<T>::infinity();
  if (x == std::numeric_limits<T>::infinity())
    return x;
  int e = 0;
  if (x < std::numeric_limits<T>::min()) { // subnormal: scale up exactly
    x = x * pow2<T>(Tr::mantissa_bits + 1);
    e = -(Tr::mantissa_bits + 1);
  }
  const Bits b = to_bits(x);
  constexpr Bits mant_mask = (Bits{1} << Tr::mantissa_bits) - 1;
  e += static_cast<int>(b >> Tr::mantissa_bits) - Tr::bias;
  T m = from_bits<T>((b & mant_mask) | (static_cast<Bits>(Tr::bias) << Tr::mantissa_bits));
  if (m > Tr::sqrt2) { // m in [sqrt(1/2), sqrt(2)): the series converges fastest around 1
    m = m * T(0.5);
    e += 1;
  }
  // With u = m - 1 (exact) and f = u / (2 + u): log m = 2 atanh(f) = 2f + f R(f^2), where
  // R(s) = 2s/3 + 2s^2/5 + ... Since 2f = u - f u, log m = u - (u^2/2 - f (u^2/2 + R)): the
  // large part u is exact and only small corrections carry rounding errors.
  const T u = m - T(1);
  const T f = u / (T(2) + u);
  const T s = f * f;
  T q = T(2) / T(2 * Tr::log_terms + 1);
  for (int i = Tr::log_terms - 1; i >= 1; --i)
    q = T(2) / T(2 * i + 1) + s * q;
  const T r = s * q;
  const T hfsq = T(0.5) * u * u;
  const T ef = static_cast<T>(e);
  return ef * Tr::ln2_hi - ((hfsq - (f * (hfsq + r) + ef * Tr::ln2_lo)) - u);
}

} // namespace samebits::nn::pm

// The per-element and per-row arithmetic of the GraphSAGE kernels, shared verbatim by the CPU
// (src/nn/kernels.cpp) and CUDA (src/cuda/nn.cu) implementations: one definition, so the two
// perform the same correctly rounded operations in the same order and give the same bits.
#pragma once
#include "nn/portable_math.hpp"
#include "samebits/rng.hpp"

#include <cmath>
#include <cstdint>

namespace samebits::nn::kernels {

// Adam's scalars, rounded to the parameter type once on the host (see AdamStep).
template <class T> struct AdamScalars {
  T weight_decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias2_sqrt, eps;
};

// The random stream of the dropout mask of `layer` at `epoch` (Glorot init uses streams 0..15).
SAMEBITS_PM_HD std::uint64_t dropout_stream(std::uint64_t epoch, std::uint64_t layer) {
  return (std::uint64_t{1} << 40) | (epoch << 8) | layer;
}

template <class T>
SAMEBITS_PM_HD T relu_dropout_elem(T pre, bool training, std::uint64_t seed, std::uint64_t stream,
                                   std::uint64_t i, float p, T scale) {
  const T r = pre > T(0) ? pre : T(0);
  if (!training)
    return r;
  return rng::uniform(seed, stream, i) < p ? T(0) : r * scale;
}

template <class T> SAMEBITS_PM_HD T relu_dropout_grad_elem(T out, T grad_out, T scale) {
  return out > T(0) ? grad_out * scale : T(0);
}

template <class T> SAMEBITS_PM_HD T divide_elem(T x, T deg) {
  return deg == T(0) ? T(0) : x / deg;
}

// One row of log-softmax + NLL: m = max z; s = sum_c exp(z_c - m) in ascending c;
// logp_c = (z_c - m) - log(s). With a target: nll = -logp[target],
// grad_c = (exp(logp_c) - [c == target]) / count.
template <class T>
SAMEBITS_PM_HD void log_softmax_row(const T* z, std::int64_t classes, std::int32_t target, T count,
                                    T* logp, T* grad, T* nll) {
  T m = z[0];
  for (std::int64_t c = 1; c < classes; ++c)
    m = z[c] > m ? z[c] : m;
  T s = T(0);
  for (std::int64_t c = 0; c < classes; ++c)
    s = s + pm::exp<T>(z[c] - m);
  const T ls = pm::log<T>(s);
  for (std::int64_t c = 0; c < classes; ++c)
    logp[c] = (z[c] - m) - ls;
  if (target < 0) {
    for (std::int64_t c = 0; c < classes; ++c)
      grad[c] = T(0);
    *nll = T(0);
    return;
  }
  for (std::int64_t c = 0; c < classes; ++c) {
    const T prob = pm::exp<T>(logp[c]);
    grad[c] = (c == target ? prob - T(1) : prob) / count;
  }
  *nll = -logp[target];
}

template <class T>
SAMEBITS_PM_HD void adam_elem(T& p, T grad, T& m, T& v, const AdamScalars<T>& k) {
  const T g = grad + k.weight_decay * p;
  m = k.beta1 * m + k.one_minus_beta1 * g;
  v = k.beta2 * v + (k.one_minus_beta2 * g) * g;
  const T denom = std::sqrt(v) / k.bias2_sqrt + k.eps;
  p = p - k.step_size * (m / denom);
}

} // namespace samebits::nn::kernels

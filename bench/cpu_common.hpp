// Shared set-up of the CPU benchmarks: random inputs and the level argument.
#pragma once
#include "samebits/samebits.hpp"

#include <benchmark/benchmark.h>
#include <random>

namespace samebits::bench {

inline Tensor normal(const Shape& shape, DType dtype = DType::f32, std::uint64_t seed = 7) {
  Tensor t = Tensor::empty(shape, dtype);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d;
  if (dtype == DType::f32)
    for (std::int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = static_cast<float>(d(gen));
  else
    for (std::int64_t i = 0; i < t.numel(); ++i)
      t.data<double>()[i] = d(gen);
  return t;
}

inline Tensor indices(std::int64_t n, std::int64_t hi, std::uint64_t seed = 11) {
  Tensor t = Tensor::empty({n}, DType::i64);
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> d(0, hi - 1);
  for (std::int64_t i = 0; i < n; ++i)
    t.data<std::int64_t>()[i] = d(gen);
  return t;
}

inline Determinism level_arg(const benchmark::State& s, int i) {
  return static_cast<Determinism>(s.range(i));
}

// Benchmarks run at the thread count in SAMEBITS_NUM_THREADS (default: all cores).
inline void label(benchmark::State& s, Determinism level) {
  s.SetLabel(std::string(to_string(level)) + " threads=" + std::to_string(num_threads()));
}

} // namespace samebits::bench

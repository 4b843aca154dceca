// What a random fill computes, shared by the CPU fill (src/core/random.cpp) and the CUDA kernel
// (src/cuda/rng.cu): element i of the output is value_at(f, offset + i), converted to its dtype.
#pragma once
#include "ops/host_device.hpp"
#include "samebits/rng.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>
#include <type_traits>

namespace samebits::detail {

enum class RandomKind : std::uint8_t { uniform, normal, bernoulli, integers };

struct RandomFill {
  RandomKind kind = RandomKind::uniform;
  std::uint64_t seed = 0, stream = 0, offset = 0;
  double mean = 0, stddev = 1; // normal
  float p = 0;                 // bernoulli
  std::int64_t lo = 0;         // integers: lo + uniform_int(range)
  std::uint64_t range = 1;
};

// The value of index j (= offset + i) as type T. Host and device.
template <class T> SAMEBITS_HD T random_value(const RandomFill& f, std::uint64_t j);
// bfloat16, float16: the float32 value, rounded once (so CPU and CUDA agree).
template <class T>
requires is_half_v<T> SAMEBITS_HD T random_value(const RandomFill& f, std::uint64_t j) {
  return T(random_value<float>(f, j));
}
template <class T> SAMEBITS_HD T random_value(const RandomFill& f, std::uint64_t j) {
  switch (f.kind) {
  case RandomKind::uniform:
    if constexpr (sizeof(T) == 8 && !std::is_integral_v<T>)
      return static_cast<T>(rng::uniform_double(f.seed, f.stream, j));
    else
      return static_cast<T>(rng::uniform(f.seed, f.stream, j));
  case RandomKind::normal: {
    const T z = static_cast<T>(rng::normal(f.seed, f.stream, j));
    if constexpr (std::is_same_v<T, float>) {
      return rng::fp::add(static_cast<float>(f.mean),
                          rng::fp::mul(static_cast<float>(f.stddev), z));
    } else {
#if defined(__CUDA_ARCH__)
      return __dadd_rn(static_cast<T>(f.mean), __dmul_rn(static_cast<T>(f.stddev), z));
#else
      return static_cast<T>(f.mean) + static_cast<T>(f.stddev) * z;
#endif
    }
  }
  case RandomKind::bernoulli:
    return static_cast<T>(rng::bernoulli(f.seed, f.stream, j, f.p) ? 1 : 0);
  case RandomKind::integers:
    return static_cast<T>(
        f.lo + static_cast<std::int64_t>(rng::uniform_int(f.seed, f.stream, j, f.range)));
  }
  return T{};
}

// Fills a contiguous CUDA tensor (src/cuda/rng.cu; BackendUnavailable without CUDA).
void cuda_fill_random(const TensorView& out, const RandomFill& f);

} // namespace samebits::detail

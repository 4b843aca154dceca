// Inputs and the float64 reference shared by the CPU and GPU tests of segment_reduce/aggregate.
#pragma once
#include "samebits/samebits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace samebits::testing {

// Random CSR offsets for `segs` segments averaging `avg` positions; segment s is empty when
// s % empty_every == empty_at, so every test sees empty segments.
inline Tensor random_offsets(std::int64_t segs, std::int64_t avg, std::uint64_t seed,
                             std::int64_t empty_every, std::int64_t empty_at) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> len(0, 2 * avg);
  std::vector<std::int64_t> off(static_cast<std::size_t>(segs + 1), 0);
  for (std::int64_t s = 0; s < segs; ++s)
    off[static_cast<std::size_t>(s + 1)] =
        off[static_cast<std::size_t>(s)] + (s % empty_every == empty_at ? 0 : len(gen));
  return Tensor::from_vector(off, {segs + 1});
}

// float64 reference of out[s, f] = reduce over positions k of segment s of x[row(k)][f], where
// row(k) = (*idx)[k] for an aggregation and k for a segment reduction. Empty segments give 0.
inline std::vector<double> segment_reference(const std::vector<double>& x, std::int64_t cols,
                                             const std::vector<std::int64_t>& off,
                                             const std::vector<std::int64_t>* idx, Reduce r) {
  const auto segs = static_cast<std::int64_t>(off.size()) - 1;
  std::vector<double> out(static_cast<std::size_t>(segs * cols), 0.0);
  for (std::int64_t s = 0; s < segs; ++s)
    for (std::int64_t f = 0; f < cols; ++f) {
      const auto b = off[static_cast<std::size_t>(s)], e = off[static_cast<std::size_t>(s + 1)];
      if (b == e)
        continue;
      long double acc = r == Reduce::amax ? -INFINITY : r == Reduce::amin ? INFINITY : 0.0L;
      for (auto k = b; k < e; ++k) {
        const auto row = idx ? (*idx)[static_cast<std::size_t>(k)] : k;
        const double v = x[static_cast<std::size_t>(row * cols + f)];
        if (r == Reduce::amax)
          acc = std::max<long double>(acc, v);
        else if (r == Reduce::amin)
          acc = std::min<long double>(acc, v);
        else
          acc += v;
      }
      if (r == Reduce::mean)
        acc /= static_cast<long double>(e - b);
      out[static_cast<std::size_t>(s * cols + f)] = static_cast<double>(acc);
    }
  return out;
}

} // namespace samebits::testing

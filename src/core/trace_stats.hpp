// The float64 statistics that both trace writers take of a host tensor's values: the C++
// recorder (trace.cpp, every element) and trace::digest (trace_digest.cpp, every stride-th one).
// Each applies its own rule for NaNs to the result.
#pragma once
#include "samebits/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace samebits::trace::detail {

struct Moments {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, sq = 0; // NaNs skipped
  std::int64_t nan_count = 0;
  std::vector<double> samples; // the kSamples values at floor(k * n / kSamples)
};

// Elements 0, stride, 2 * stride, ... of p[0, n), in that order (so the sums reproduce too).
template <class T> Moments moments(const T* p, std::int64_t n, std::int64_t stride) {
  Moments m;
  for (std::int64_t i = 0; i < n; i += stride) {
    const double v = static_cast<double>(p[i]);
    if (std::isnan(v)) {
      ++m.nan_count;
      continue;
    }
    m.lo = std::min(m.lo, v);
    m.hi = std::max(m.hi, v);
    m.sum += v;
    m.sq += v * v;
  }
  const std::int64_t k = std::min<std::int64_t>(kSamples, n);
  for (std::int64_t j = 0; j < k; ++j)
    m.samples.push_back(static_cast<double>(p[j * n / k]));
  return m;
}

} // namespace samebits::trace::detail

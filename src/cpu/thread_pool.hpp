// The CPU backend's fixed-size thread pool (size: samebits::num_threads()).
#pragma once
#include <cstdint>
#include <functional>

namespace samebits::detail {

// Runs f(task) for every task in [0, ntasks); the calling thread takes part. Tasks are claimed
// dynamically, so which thread runs a task varies from call to call: a deterministic variant
// must make each task's result depend on the task alone. The first exception thrown by a task
// is rethrown here after all tasks have stopped.
void parallel_for(std::int64_t ntasks, const std::function<void(std::int64_t task)>& f);

// Splits [0, n) into `parts` near-equal ranges; returns range `i` as [begin, end).
inline std::pair<std::int64_t, std::int64_t> split_range(std::int64_t n, std::int64_t parts,
                                                         std::int64_t i) {
  const std::int64_t q = n / parts, r = n % parts;
  const std::int64_t b = i * q + (i < r ? i : r);
  return {b, b + q + (i < r ? 1 : 0)};
}

} // namespace samebits::detail

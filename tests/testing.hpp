// Helpers shared by the tests: fresh random inputs (never zeros), float64 references, thread
// count guards, and bitwise comparisons.
//
// Tests use the public headers, this file and the reference headers beside it, and of src/ only
// the internal testing headers that tests/check_layers.cmake lists (the registry, memory, plan
// cache, tuning and test hooks of core/, the shared op math of ops/, cuda/check.cuh, and the
// GraphSAGE kernels of nn/); a CTest check refuses any other.
#pragma once
#include "samebits/samebits.hpp"
#include "samebits/stream.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace samebits::testing {

// The message of the E that f() throws; nullopt when it throws nothing (any other exception
// propagates, and the test fails on it).
template <class E, class F> std::optional<std::string> caught(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// A new seed for every call (from std::random_device); tests print it on failure via SCOPED_TRACE.
std::uint64_t fresh_seed();

// Random tensors on the CPU (then moved to `device`).
Tensor random_normal(const Shape& shape, DType dtype, std::uint64_t seed,
                     Device device = Device::cpu());
Tensor random_uniform(const Shape& shape, DType dtype, double lo, double hi, std::uint64_t seed,
                      Device device = Device::cpu());
// Integers uniform in [0, hi), as int32 or int64.
Tensor random_index(std::int64_t n, std::int64_t hi, DType dtype, std::uint64_t seed,
                    Device device = Device::cpu());
// Values of any dtype on the CPU: normal for floats, uniform in [0, 2^30) for integers.
Tensor random_values(const Shape& shape, DType dtype, std::uint64_t seed);

// Values of any tensor (any device, any strides) as doubles, in row-major order.
std::vector<double> to_doubles(const TensorView& t);

// ||out - ref|| / max(||ref||, tiny) over all elements; NaN anywhere in out gives +inf.
double relative_error(const TensorView& out, const std::vector<double>& ref);
// ||out - ref|| / ||scale||: the error against the size of what was summed (scale = the same
// reduction over absolute values), which stays meaningful when the terms cancel.
double error_against_scale(const TensorView& out, const std::vector<double>& ref,
                           const std::vector<double>& scale);

// A strided (non-contiguous) copy of t: the same values, stored in every other column of a
// larger buffer. `keep` owns the storage.
TensorView strided_copy(const Tensor& t, Tensor& keep);

// A 1-D index vector seen with `shape` (its dim 0 along the vector, stride 0 on every other dim):
// the index of scatter_add / scatter_reduce that names one target per source row.
TensorView expanded_index(const Tensor& vec, const Shape& shape);

// Splits the cases of a long test loop between processes: with SAMEBITS_TEST_SHARD="i/n" in the
// environment, case c runs only in the process where c % n == i (every case when unset). Slow
// checkers such as compute-sanitizer run the shards side by side.
bool case_in_shard(int c);

// Leaves out the largest cases under compute-sanitizer: bench/sanitize_one.sh sets
// SAMEBITS_TEST_WORK_LIMIT, and a case whose work (elements, or multiply-adds for gemm) exceeds it
// is skipped, so that racecheck, which follows every shared-memory access, finishes. The smaller
// cases of the same test run the same kernels. Unset: every case runs. The process prints how many
// cases it left out when it exits.
bool within_work_limit(std::int64_t work);

// True when every byte of s is printable ASCII (what an error message may quote from a file).
bool all_printable(const std::string& s);

// Sets the CPU thread count for its lifetime.
class ThreadCount {
public:
  explicit ThreadCount(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved_); }

private:
  int saved_;
};

// Sets the CUDA index checks for its lifetime and drops any deferred error left pending.
class ChecksScope {
public:
  explicit ChecksScope(CudaIndexChecks c) : was_(cuda_index_checks()) { set_cuda_index_checks(c); }
  ~ChecksScope() {
    try {
      check_index_errors(Device::cuda());
    } catch (const IndexOutOfRange&) {
    }
    set_cuda_index_checks(was_);
  }
  ChecksScope(const ChecksScope&) = delete;
  ChecksScope& operator=(const ChecksScope&) = delete;

private:
  CudaIndexChecks was_;
};

// Sets the byte limit of automatic plan reuse for its lifetime (0: every call sorts), starting
// from an empty cache.
class PlanCacheLimit {
public:
  explicit PlanCacheLimit(std::size_t bytes) : saved_(plan_cache_stats().limit_bytes) {
    set_plan_cache_limit(0);
    set_plan_cache_limit(bytes);
  }
  ~PlanCacheLimit() { set_plan_cache_limit(saved_); }

private:
  std::size_t saved_;
};

// True when a CUDA device is present; GPU tests call GTEST_SKIP() otherwise.
#define SAMEBITS_REQUIRE_CUDA()                                                                    \
  do {                                                                                             \
    if (!::samebits::cuda_available())                                                             \
      GTEST_SKIP() << "no CUDA device";                                                            \
  } while (0)

} // namespace samebits::testing

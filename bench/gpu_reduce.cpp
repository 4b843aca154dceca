// GPU benchmarks of sum, sum_dim and dot, every CUDA variant: whole-tensor sums of 2^24 and 2^28
// elements (float32; float64 at the same byte count), dot products, and sum_dim of an
// [8192, 8192] matrix along each dim. Bytes = inputs read once + outputs written once; the report
// (gpu_main.cpp) turns them into bandwidth against the measured copy ceiling.
#include "gpu_common.hpp"
#include "ops/reduce_choice.hpp"

#include <fmt/format.h>
#include <utility>

namespace samebits::bench {

namespace {

std::string pow2(std::int64_t n) {
  int k = 0;
  while ((std::int64_t{1} << k) < n)
    ++k;
  return (std::int64_t{1} << k) == n ? fmt::format("2^{}", k) : std::to_string(n);
}

// Runs fn(options) for every CUDA variant of `op` and adds one row per variant.
template <class Fn>
void each_variant(Report& r, const char* op, const std::string& shape, double bytes, Fn&& fn,
                  const std::string& note = "") {
  for (const auto& v : list_variants(op)) {
    if (v.backend != DeviceType::cuda)
      continue;
    const Options o{.level = v.level, .variant = v.name};
    const double ms = time_ms([&] { fn(o); }, r.quick ? 10 : 50);
    r.add({"reduce", op, shape, v.name, std::string(to_string(v.level)), ms, bytes, note});
  }
}

// Times the portable variant of one call under other launch configurations (ReduceTuning,
// ops/reduce_choice.hpp): same bits, other speed,
// so that a run shows whether the default configuration is the fastest.
template <class Fn>
void portable_configs(Report& r, const char* op, const std::string& shape, double bytes, Fn&& fn) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const std::int64_t persistent = 8 * sms;
  const std::pair<int, std::int64_t> configs[] = {{64, 0}, {256, 0}, {128, persistent}};
  const Options o{.level = Determinism::portable, .variant = "cuda.canonical_tree"};
  for (const auto& [block, grid] : configs) {
    const detail::TuningGuard<detail::ReduceTuning> tuned({.block = block, .grid = grid});
    const double ms = time_ms([&] { fn(o); }, r.quick ? 10 : 50);
    r.add({"reduce", op, shape,
           fmt::format("cuda.canonical_tree [block {}{}]", block,
                       grid == 0 ? "" : fmt::format(", grid {}", grid)),
           "portable", ms, bytes, "launch override (same bits as the default)"});
  }
}

} // namespace

void bench_reduce(Report& r) {
  // Whole-tensor sums. Target (issue 3): the portable float32 sum of 2^28 elements at >= 80% of
  // the copy ceiling.
  for (DType dtype : {DType::f32, DType::f64}) {
    for (std::int64_t n : {std::int64_t{1} << 24, std::int64_t{1} << 28}) {
      if (dtype == DType::f64)
        n /= 2; // same bytes as the float32 row
      if (r.quick && n > (1 << 24))
        continue;
      const double bytes = static_cast<double>(n) * static_cast<double>(size_of(dtype));
      Tensor x = gpu_normal({n}, dtype);
      Tensor out = Tensor::empty({1}, dtype, Device::cuda());
      const std::string shape = fmt::format("{} n={}", to_string(dtype), pow2(n));
      auto run = [&](const Options& o) { sum(x, out, o); };
      const bool target = dtype == DType::f32 && n == (std::int64_t{1} << 28);
      each_variant(
          r, "sum", shape, bytes, run,
          target ? "target: portable >= 80% of ceiling (<= 0.32 ms); expected about 0.28 ms" : "");
      if (target)
        portable_configs(r, "sum", shape, bytes, run);
    }
  }
  // Dot products: two inputs read once.
  for (std::int64_t n : {std::int64_t{1} << 24, std::int64_t{1} << 27}) {
    if (r.quick && n > (1 << 24))
      continue;
    Tensor a = gpu_normal({n}, DType::f32, 3), b = gpu_normal({n}, DType::f32, 4);
    Tensor out = Tensor::empty({1}, DType::f32, Device::cuda());
    each_variant(r, "dot", fmt::format("f32 n={}", pow2(n)), 2.0 * static_cast<double>(n) * 4,
                 [&](const Options& o) { dot(a, b, out, o); });
  }
  // sum_dim of [8192, 8192] float32 along each dim (dim 1: rows, one warp per chunk; dim 0:
  // columns, neighbouring outputs read together).
  {
    const std::int64_t n = r.quick ? 4096 : 8192;
    Tensor x = gpu_normal({n, n});
    Tensor out = Tensor::empty({n}, DType::f32, Device::cuda());
    for (int dim : {0, 1}) {
      const std::string shape = fmt::format("f32 [{}, {}] dim {}", n, n, dim);
      const double bytes =
          static_cast<double>(n) * static_cast<double>(n) * 4 + static_cast<double>(n) * 4;
      auto run = [&](const Options& o) { sum_dim(x, dim, out, o); };
      each_variant(r, "sum_dim", shape, bytes, run);
      portable_configs(r, "sum_dim", shape, bytes, run);
    }
  }
}

} // namespace samebits::bench

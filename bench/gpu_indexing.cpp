// GPU benchmarks of index_select and gather (copies; one variant serves every level).
#include "gpu_common.hpp"

#include <fmt/format.h>

namespace samebits::bench {

void bench_indexing(Report& r) {
  const std::int64_t q = r.quick ? 10 : 1;
  { // Row gather, as a GNN's edge gather: x [1M, 128] -> out [2M, 128].
    const std::int64_t n = 1'000'000 / q, m = 2'000'000 / q, f = 128;
    Tensor x = gpu_normal({n, f}), idx = gpu_index(m, n);
    Tensor out = Tensor::empty({m, f}, DType::f32, Device::cuda());
    const double bytes = 8.0 * m * f + 8.0 * m;
    for (const auto& v : list_variants("index_select")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      const double ms = time_ms([&] { index_select(x, 0, idx, out, o); });
      r.add({"indexing", "index_select dim 0", fmt::format("x [{}, {}] -> {} rows", n, f, m),
             v.name, std::string(to_string(v.level)), ms, bytes,
             "index checked on the device every call"});
    }
  }
  { // Column selection: x [100k, 1024], dim 1, 512 columns (one element per copy).
    const std::int64_t n = 100'000 / q, c = 1024, m = 512;
    Tensor x = gpu_normal({n, c}), idx = gpu_index(m, c);
    Tensor out = Tensor::empty({n, m}, DType::f32, Device::cuda());
    for (const auto& v : list_variants("index_select")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      const double ms = time_ms([&] { index_select(x, 1, idx, out, o); });
      r.add({"indexing", "index_select dim 1", fmt::format("x [{}, {}] -> {} cols", n, c, m),
             v.name, std::string(to_string(v.level)), ms, 8.0 * n * m, ""});
    }
  }
  { // gather along dim 1: x [1M, 64], index [1M, 16] int64.
    const std::int64_t n = 1'000'000 / q, c = 64, k = 16;
    Tensor x = gpu_normal({n, c});
    Tensor idx = Tensor::copy_of(gpu_index(n * k, c).view().reshape({n, k}));
    Tensor out = Tensor::empty({n, k}, DType::f32, Device::cuda());
    for (const auto& v : list_variants("gather")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      const double ms = time_ms([&] { gather(x, 1, idx, out, o); });
      r.add({"indexing", "gather dim 1", fmt::format("x [{}, {}], index [{}, {}]", n, c, n, k),
             v.name, std::string(to_string(v.level)), ms, 16.0 * n * k,
             "bytes: index + out (+ gathered x)"});
    }
  }
}

} // namespace samebits::bench

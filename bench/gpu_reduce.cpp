// GPU benchmarks of sum, sum_dim and dot, every CUDA variant.
#include <fmt/format.h>

#include "gpu_common.hpp"

namespace samebits::bench {

void bench_reduce(Report& r) {
  const std::int64_t sizes[] = {std::int64_t{1} << 24, std::int64_t{1} << 28};
  for (std::int64_t n : sizes) {
    if (r.quick && n > (1 << 24)) continue;
    Tensor x = gpu_normal({n});
    Tensor out = Tensor::empty({1}, DType::f32, Device::cuda());
    for (const auto& v : list_variants("sum")) {
      if (v.backend != DeviceType::cuda) continue;
      Options o{.level = v.level, .variant = v.name};
      const double ms = time_ms([&] { sum(x, out, o); });
      r.add({"reduce", "sum", fmt::format("n=2^{}", n == (1 << 24) ? 24 : 28), v.name,
             std::string(to_string(v.level)), ms, static_cast<double>(n) * 4, ""});
    }
  }
}

}  // namespace samebits::bench

// GPU benchmarks of cumsum, every CUDA variant: long float32 lines, [4096, 4096] along each dim,
// and many short lines (a thread per line).
#include "gpu_common.hpp"

#include <fmt/format.h>

namespace samebits::bench {

void bench_scan(Report& r) {
  struct Case {
    Shape shape;
    int dim;
    std::string name;
  };
  const Case cases[] = {{{std::int64_t{1} << 24}, 0, "n=2^24"},
                        {{std::int64_t{1} << 28}, 0, "n=2^28"},
                        {{4096, 4096}, 0, "[4096,4096] dim 0"},
                        {{4096, 4096}, 1, "[4096,4096] dim 1"},
                        {{std::int64_t{1} << 22, 4}, 1, "[2^22,4] dim 1"},
                        {{std::int64_t{1} << 18, 64}, 1, "[2^18,64] dim 1"},
                        {{std::int64_t{1} << 16, 256}, 1, "[2^16,256] dim 1"}};
  for (const Case& c : cases) {
    if (r.quick && c.shape[0] > (1 << 24))
      continue;
    Tensor x = gpu_normal(c.shape);
    Tensor out = Tensor::empty(c.shape, DType::f32, Device::cuda());
    for (const auto& v : list_variants("cumsum")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      try { // a variant that does not take this tensor (cuda.cub_scan: several lines) is left out
        cumsum(x, c.dim, out, o);
      } catch (const InvalidArgument&) {
        continue;
      }
      const double ms = time_ms([&] { cumsum(x, c.dim, out, o); });
      r.add({"scan", "cumsum", c.name, v.name, std::string(to_string(v.level)), ms,
             2.0 * static_cast<double>(x.nbytes()), ""});
    }
  }
}

} // namespace samebits::bench

// GPU benchmarks of bincount (weighted and counts) and histc, every CUDA variant.
#include "gpu_common.hpp"

#include <fmt/format.h>

namespace samebits::bench {

void bench_histogram(Report& r) {
  const std::int64_t n = 10'000'000;
  for (std::int64_t bins : {std::int64_t{1000}, std::int64_t{1'000'000}}) {
    Tensor idx = gpu_index(n, bins);
    Tensor w = gpu_normal({n});
    Tensor out = Tensor::empty({bins}, DType::f32, Device::cuda());
    Tensor counts = Tensor::empty({bins}, DType::i64, Device::cuda());
    for (const auto& v : list_variants("bincount")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      const std::string shape = fmt::format("n=10M bins={}", bins);
      double ms = time_ms([&] { bincount(idx, w, out, o); });
      r.add({"histogram", "bincount weighted", shape, v.name, std::string(to_string(v.level)), ms,
             static_cast<double>(idx.nbytes() + w.nbytes() + out.nbytes()), ""});
      ms = time_ms([&] { bincount(idx, TensorView{}, counts, o); });
      r.add({"histogram", "bincount counts", shape, v.name, std::string(to_string(v.level)), ms,
             static_cast<double>(idx.nbytes() + counts.nbytes()), ""});
    }
  }
  for (int log2n : {24, 28}) {
    if (r.quick && log2n > 24)
      continue;
    Tensor x = gpu_normal({std::int64_t{1} << log2n});
    for (std::int64_t bins : {std::int64_t{100}, std::int64_t{10000}}) {
      Tensor out = Tensor::empty({bins}, DType::f32, Device::cuda());
      for (const auto& v : list_variants("histc")) {
        if (v.backend != DeviceType::cuda)
          continue;
        Options o{.level = v.level, .variant = v.name};
        const double ms = time_ms([&] { histc(x, -3.0, 3.0, out, o); });
        r.add({"histogram", "histc", fmt::format("n=2^{} bins={}", log2n, bins), v.name,
               std::string(to_string(v.level)), ms, static_cast<double>(x.nbytes() + out.nbytes()),
               ""});
      }
    }
  }
}

} // namespace samebits::bench

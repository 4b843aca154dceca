// CPU benchmarks of cumsum, per variant: one long line, and [4096, 4096] along each dim.
#include "cpu_common.hpp"

namespace samebits::bench {

// range(0): rows (1 = one line of range(1) elements), range(1): columns, range(2): dim,
// range(3): level.
static void BM_cumsum(benchmark::State& s) {
  const auto level = level_arg(s, 3);
  const Shape shape = s.range(0) == 1 ? Shape{s.range(1)} : Shape{s.range(0), s.range(1)};
  const int dim = static_cast<int>(s.range(2));
  Tensor x = normal(shape);
  Tensor out = Tensor::empty(shape, DType::f32);
  for (auto _ : s) {
    cumsum(x, dim, out, {.level = level});
    benchmark::DoNotOptimize(out.data<float>()[0]);
  }
  s.SetBytesProcessed(s.iterations() * 2 * static_cast<std::int64_t>(x.nbytes()));
  label(s, level);
}
BENCHMARK(BM_cumsum)
    ->ArgsProduct({{1}, {1 << 24}, {0}, {0, 2}})
    ->ArgsProduct({{4096}, {4096}, {0, 1}, {0, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace samebits::bench

// CPU benchmarks of bincount (weighted, and counts) and histc, per variant.
#include "cpu_common.hpp"

namespace samebits::bench {

// range(0): indices, range(1): bins, range(2): weighted, range(3): level.
static void BM_bincount(benchmark::State& s) {
  const auto level = level_arg(s, 3);
  const std::int64_t n = s.range(0), bins = s.range(1);
  const bool weighted = s.range(2) != 0;
  Tensor idx = indices(n, bins);
  Tensor w = normal({n});
  Tensor out = Tensor::empty({bins}, weighted ? DType::f32 : DType::i64);
  for (auto _ : s) {
    bincount(idx, weighted ? w.view() : TensorView{}, out, {.level = level});
    benchmark::DoNotOptimize(out.raw());
  }
  s.SetBytesProcessed(
      s.iterations() *
      static_cast<std::int64_t>(idx.nbytes() + (weighted ? w.nbytes() : 0) + out.nbytes()));
  label(s, level);
}
BENCHMARK(BM_bincount)
    ->ArgsProduct({{10'000'000}, {1000, 1'000'000}, {1}, {0, 2}})
    ->ArgsProduct({{10'000'000}, {1000}, {0}, {2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// range(0): values, range(1): bins. histc has one (portable) variant on the CPU.
static void BM_histc(benchmark::State& s) {
  Tensor x = normal({s.range(0)});
  Tensor out = Tensor::empty({s.range(1)}, DType::f32);
  for (auto _ : s) {
    histc(x, -3.0, 3.0, out, {.level = Determinism::portable});
    benchmark::DoNotOptimize(out.raw());
  }
  s.SetBytesProcessed(s.iterations() * static_cast<std::int64_t>(x.nbytes() + out.nbytes()));
  label(s, Determinism::portable);
}
BENCHMARK(BM_histc)
    ->ArgsProduct({{1 << 24}, {100, 10000}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace samebits::bench

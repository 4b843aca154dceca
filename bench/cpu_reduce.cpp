// CPU benchmarks of sum and dot, per variant.
#include "cpu_common.hpp"

namespace samebits::bench {

static void BM_sum(benchmark::State& s) {
  const auto level = level_arg(s, 1);
  Tensor x = normal({s.range(0)});
  Tensor out = Tensor::empty({1}, DType::f32);
  for (auto _ : s) {
    sum(x, out, {.level = level});
    benchmark::DoNotOptimize(out.data<float>()[0]);
  }
  s.SetBytesProcessed(s.iterations() * static_cast<std::int64_t>(x.nbytes()));
  label(s, level);
}
BENCHMARK(BM_sum)
    ->ArgsProduct({{1 << 24, 1 << 26}, {0, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The cost of one call on 8 values: what every op pays around its kernel (the variant's choice,
// its explanation, the workspace), the part a PyTorch training of many small calls feels.
static void BM_sum_call(benchmark::State& s) {
  BM_sum(s);
}
BENCHMARK(BM_sum_call)->ArgsProduct({{8}, {0, 2}})->Unit(benchmark::kMicrosecond);

static void BM_dot(benchmark::State& s) {
  const auto level = level_arg(s, 1);
  Tensor a = normal({s.range(0)}), b = normal({s.range(0)}, DType::f32, 8);
  Tensor out = Tensor::empty({1}, DType::f32);
  for (auto _ : s) {
    dot(a, b, out, {.level = level});
    benchmark::DoNotOptimize(out.data<float>()[0]);
  }
  s.SetBytesProcessed(s.iterations() * 2 * static_cast<std::int64_t>(a.nbytes()));
  label(s, level);
}
BENCHMARK(BM_dot)->ArgsProduct({{1 << 24}, {0, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);

} // namespace samebits::bench

// CPU benchmarks of gemm, per variant: the shapes of GraphSAGE on Cora (forward and the weight
// and input gradients) and square matrices. GFLOP/s in the counters (2mnk flops per call). CPU
// time is the whole process's (all pool threads), which a loaded machine inflates less than the
// real time: compare it with bench/openblas_gemm.py's figure for OpenBLAS.
#include "core/tuning.hpp"
#include "cpu_common.hpp"
#include "ops/gemm.hpp"

namespace samebits::bench {

// Args: m, n, k, trans_a, trans_b, level (0 not_guaranteed: split-K with atomics, 2 portable).
static void BM_gemm(benchmark::State& s) {
  const std::int64_t m = s.range(0), n = s.range(1), k = s.range(2);
  const auto ta = s.range(3) ? Transpose::yes : Transpose::no;
  const auto tb = s.range(4) ? Transpose::yes : Transpose::no;
  const auto level = level_arg(s, 5);
  Tensor a = ta == Transpose::yes ? normal({k, m}) : normal({m, k});
  Tensor b = tb == Transpose::yes ? normal({n, k}, DType::f32, 8) : normal({k, n}, DType::f32, 8);
  Tensor c = Tensor::empty({m, n}, DType::f32);
  for (auto _ : s) {
    gemm(ta, tb, 1.0, a, b, 0.0, c, {.level = level});
    benchmark::DoNotOptimize(c.data<float>()[0]);
  }
  s.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) *
                                                 static_cast<double>(s.iterations()) / 1e9,
                                             benchmark::Counter::kIsRate);
  label(s, level);
}
BENCHMARK(BM_gemm)
    ->ArgNames({"m", "n", "k", "ta", "tb", "level"})
    ->ArgsProduct({{2708}, {16}, {1433}, {0}, {0}, {0, 2}}) // x @ W1
    ->ArgsProduct({{1433}, {16}, {2708}, {1}, {0}, {0, 2}}) // x^T @ dH (dW1)
    ->ArgsProduct({{2708}, {7}, {16}, {0}, {0}, {0, 2}})    // h @ W2
    ->ArgsProduct({{16}, {7}, {2708}, {1}, {0}, {0, 2}})    // h^T @ dO (dW2)
    ->ArgsProduct({{2708}, {16}, {7}, {0}, {1}, {0, 2}})    // dO @ W2^T (dH)
    ->ArgsProduct({{512}, {512}, {512}, {0}, {0}, {0, 2}})
    ->ArgsProduct({{1024}, {1024}, {1024}, {0}, {0}, {0, 2}})
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

// The portable 1024^3 product per micro-kernel set (arg: 1 generic std::fma, 2 AVX2 + FMA,
// 3 AVX-512), on this CPU's sets only: the same bits, at each set's speed.
static void BM_gemm_isa(benchmark::State& s) {
  const auto isa = static_cast<detail::CpuGemmIsa>(s.range(0));
  if (!detail::cpu_gemm_has(isa)) {
    s.SkipWithError("this CPU does not run that set");
    return;
  }
  const detail::TuningGuard<detail::GemmTuning> guard({.cpu_isa = isa});
  Tensor a = normal({1024, 1024}), b = normal({1024, 1024}, DType::f32, 8);
  Tensor c = Tensor::empty({1024, 1024}, DType::f32);
  for (auto _ : s) {
    gemm(Transpose::no, Transpose::no, 1.0, a, b, 0.0, c, {.level = Determinism::portable});
    benchmark::DoNotOptimize(c.data<float>()[0]);
  }
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * 1024 * 1024 * 1024 * static_cast<double>(s.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  s.SetLabel(std::string(detail::cpu_gemm_isa_name()) +
             " threads=" + std::to_string(num_threads()));
}
BENCHMARK(BM_gemm_isa)
    ->ArgName("isa")
    ->DenseRange(1, 3)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

} // namespace samebits::bench

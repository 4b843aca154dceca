// CPU benchmarks of index_select (row gathers, as in a GNN's edge gather) and gather.
#include "cpu_common.hpp"

namespace samebits::bench {

// args: rows of x, features, selected rows. Bytes: selected rows read once, written once, index.
static void BM_index_select_rows(benchmark::State& s) {
  const std::int64_t n = s.range(0), f = s.range(1), m = s.range(2);
  Tensor x = normal({n, f}), idx = indices(m, n), out = Tensor::empty({m, f}, DType::f32);
  for (auto _ : s) {
    index_select(x, 0, idx, out);
    benchmark::DoNotOptimize(out.data<float>()[0]);
  }
  s.SetBytesProcessed(s.iterations() * (2 * m * f * 4 + m * 8));
  label(s, Determinism::portable);
}
BENCHMARK(BM_index_select_rows)
    ->Args({2708, 1433, 10556})
    ->Args({2708, 128, 200000})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// gather along dim 1 of [rows, cols] with an index of [rows, k].
static void BM_gather_dim1(benchmark::State& s) {
  const std::int64_t rows = s.range(0), cols = s.range(1), k = s.range(2);
  Tensor x = normal({rows, cols});
  Tensor idx = Tensor::copy_of(indices(rows * k, cols).view().reshape({rows, k}));
  Tensor out = Tensor::empty({rows, k}, DType::f32);
  for (auto _ : s) {
    gather(x, 1, idx, out);
    benchmark::DoNotOptimize(out.data<float>()[0]);
  }
  s.SetBytesProcessed(s.iterations() * rows * k * (4 + 4 + 8));
  label(s, Determinism::portable);
}
BENCHMARK(BM_gather_dim1)->Args({100000, 64, 16})->UseRealTime()->Unit(benchmark::kMillisecond);

} // namespace samebits::bench

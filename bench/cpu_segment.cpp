// CPU benchmarks of aggregate (Cora-sized graphs) and segment_reduce (presorted anchor shapes),
// the atomic and the portable variant side by side.
#include "cpu_common.hpp"

namespace samebits::bench {

namespace {

Csr random_csr(std::int64_t nodes, std::int64_t edges) {
  return csr_from_edges(indices(edges, nodes, 21), indices(edges, nodes, 22), nodes);
}

// Sorted offsets of `edges` positions over `segs` segments (random targets, counted).
Tensor presorted_offsets(std::int64_t edges, std::int64_t segs) {
  Tensor t = indices(edges, segs, 23);
  std::vector<std::int64_t> off(static_cast<std::size_t>(segs + 1), 0);
  for (std::int64_t k = 0; k < edges; ++k)
    ++off[static_cast<std::size_t>(t.data<std::int64_t>()[k] + 1)];
  for (std::int64_t s = 0; s < segs; ++s)
    off[static_cast<std::size_t>(s + 1)] += off[static_cast<std::size_t>(s)];
  return Tensor::from_vector(off, {segs + 1});
}

} // namespace

// args: nodes, edges, features, level. Bytes: x and out once, CSR once.
static void BM_aggregate_mean(benchmark::State& s) {
  const auto level = level_arg(s, 3);
  const std::int64_t n = s.range(0), e = s.range(1), f = s.range(2);
  const Csr csr = random_csr(n, e);
  Tensor x = normal({n, f}), out = Tensor::empty({n, f}, DType::f32);
  for (auto _ : s) {
    aggregate(csr.view(), x, out, Reduce::mean, {.level = level});
    benchmark::DoNotOptimize(out.data<float>()[0]);
  }
  s.SetBytesProcessed(s.iterations() * (2 * n * f * 4 + (n + 1) * 8 + e * 8));
  label(s, level);
}
BENCHMARK(BM_aggregate_mean)
    ->ArgsProduct({{2708}, {10556}, {16, 128, 1433}, {0, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// args: edges, segments, features, level. Bytes: src and out once, offsets once.
static void BM_segment_sum(benchmark::State& s) {
  const auto level = level_arg(s, 3);
  const std::int64_t e = s.range(0), n = s.range(1), f = s.range(2);
  Tensor off = presorted_offsets(e, n);
  Tensor src = normal({e, f}), out = Tensor::empty({n, f}, DType::f32);
  for (auto _ : s) {
    segment_reduce(src, off, out, Reduce::sum, {.level = level});
    benchmark::DoNotOptimize(out.data<float>()[0]);
  }
  s.SetBytesProcessed(s.iterations() * (e * f * 4 + n * f * 4 + (n + 1) * 8));
  label(s, level);
}
BENCHMARK(BM_segment_sum)
    ->ArgsProduct({{1 << 20}, {2708}, {128}, {0, 2}})
    ->ArgsProduct({{1 << 20}, {100000}, {1}, {0, 2}})
    ->ArgsProduct({{200000}, {10000}, {64}, {0, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace samebits::bench

// CPU benchmarks of what samebits.torch.trace computes per output on the host: the sum64 hash
// (trace::sum_hash_bytes) with the loop over whole words for the baseline instruction set, AVX2 and
// AVX-512 where the CPU has them (the same value), from sizes that fit in cache to 64 MiB.
#include "cpu_common.hpp"
#include "samebits/trace.hpp"

namespace samebits::bench {

// Argument 1: the loop's instruction set, 0 the baseline, 1 at most AVX2, 2 automatic.
static void BM_trace_sum_hash(benchmark::State& s) {
  using trace::detail::HashIsa;
  const HashIsa isas[] = {HashIsa::baseline, HashIsa::avx2, HashIsa::automatic};
  const char* names[] = {"baseline", "avx2", "automatic"};
  const auto which = static_cast<std::size_t>(s.range(1));
  Tensor x = normal({s.range(0)});
  for (auto _ : s)
    benchmark::DoNotOptimize(trace::detail::sum_hash_bytes(x.raw(), x.nbytes(), isas[which]));
  s.SetBytesProcessed(s.iterations() * static_cast<std::int64_t>(x.nbytes()));
  s.SetLabel(names[which]);
}
BENCHMARK(BM_trace_sum_hash)
    ->ArgsProduct({{1 << 15, 1 << 18, 1 << 21, 1 << 24}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

} // namespace samebits::bench

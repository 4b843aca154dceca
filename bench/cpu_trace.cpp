// CPU benchmarks of what samebits.torch.trace computes per output on the host: the sum64 hash
// (trace::sum_hash_bytes) with the loop over whole words for the baseline instruction set and with
// AVX-512 where the CPU has it (the same value), from sizes that fit in cache to 64 MiB.
#include "cpu_common.hpp"
#include "samebits/trace.hpp"

namespace samebits::bench {

static void BM_trace_sum_hash(benchmark::State& s) {
  const auto isa =
      s.range(1) == 0 ? trace::detail::HashIsa::baseline : trace::detail::HashIsa::automatic;
  Tensor x = normal({s.range(0)});
  for (auto _ : s)
    benchmark::DoNotOptimize(trace::detail::sum_hash_bytes(x.raw(), x.nbytes(), isa));
  s.SetBytesProcessed(s.iterations() * static_cast<std::int64_t>(x.nbytes()));
  s.SetLabel(s.range(1) == 0 ? "baseline" : "automatic");
}
BENCHMARK(BM_trace_sum_hash)
    ->ArgsProduct({{1 << 15, 1 << 18, 1 << 21, 1 << 24}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

} // namespace samebits::bench

// The short scatters that a PyG training on Cora runs every step: 13264 positions (10556 edges
// and 2708 self loops, PyG's order: the loops last) into 2708 nodes with one hub of 169 sources,
// rows of 1, 7, 16 and 64 features. As in a training under samebits.torch's mode, index checks
// are deferred and the index arrives as a fresh tensor of the same values on every call (two
// tensors in turn), so the run_to_run and portable variants find the sort they kept. Each figure
// is milliseconds per call of a loop of calls queued back to back, between one pair of events:
// the GPU's time where the host queues faster than the GPU runs, the host's otherwise (the note
// gives the host's time to queue a call, which is the GPU's pace instead once the launch queue
// fills). Rows of the family "short"; launch configurations that
// give the same bits carry them in brackets.
#include "gpu_common.hpp"
#include "ops/scatter_choice.hpp"
#include "samebits/stream.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <random>

namespace samebits::bench {

namespace {

constexpr std::int64_t kNodes = 2708, kEdges = 10556, kHub = 1358, kHubEdges = 168;

// Cora-like targets: each edge's target uniform over the nodes except the hub's 168, spread over
// the edges; then one self loop per node.
Tensor cora_like_index() {
  std::vector<std::int64_t> t(kEdges);
  std::mt19937_64 gen(7);
  std::uniform_int_distribution<std::int64_t> node(0, kNodes - 2);
  for (auto& v : t) {
    v = node(gen);
    v += v >= kHub ? 1 : 0; // never the hub by chance
  }
  std::vector<std::int64_t> where(kEdges);
  for (std::int64_t i = 0; i < kEdges; ++i)
    where[i] = i;
  std::shuffle(where.begin(), where.end(), gen);
  for (std::int64_t i = 0; i < kHubEdges; ++i)
    t[where[i]] = kHub;
  for (std::int64_t n = 0; n < kNodes; ++n)
    t.push_back(n);
  return Tensor::from_vector(t, {static_cast<std::int64_t>(t.size())}).to(Device::cuda());
}

struct LoopTime {
  double gpu_ms;  // per call, between one pair of events
  double host_ms; // per call, the host's time to queue the calls
};

// The time per call of `calls` calls queued back to back, after a warm-up.
LoopTime loop_ms(const std::function<void()>& fn, int calls) {
  for (int i = 0; i < 20; ++i)
    fn();
  EventTimer timer;
  timer.start();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    fn();
  const double host =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double ms = timer.stop_ms();
  if (cudaGetLastError() != cudaSuccess)
    throw CudaError("benchmark: a CUDA call failed while timing");
  return {ms / calls, host / calls};
}

} // namespace

// Index checks deferred, as samebits.torch's mode runs them, then the setting it found.
struct DeferredIndexChecks {
  CudaIndexChecks previous = cuda_index_checks();
  DeferredIndexChecks() { set_cuda_index_checks(CudaIndexChecks::deferred); }
  ~DeferredIndexChecks() { set_cuda_index_checks(previous); }
  DeferredIndexChecks(const DeferredIndexChecks&) = delete;
  DeferredIndexChecks& operator=(const DeferredIndexChecks&) = delete;
};

void bench_short(Report& r) {
  const AutomaticPlanReuse reuse; // as in a training
  const DeferredIndexChecks deferred;
  const int calls = r.quick ? 100 : 1000;
  const Tensor first = cora_like_index();
  const Tensor second = Tensor::copy_of(first.view()); // the same values at another address
  const std::int64_t n = first.numel();
  for (const std::int64_t f : {1, 7, 16, 64}) {
    Tensor src = gpu_normal({n, f}), out = gpu_normal({kNodes, f}, DType::f32, 3);
    const std::string shape =
        fmt::format("Cora F={}: {} into {} (hub of {})", f, n, kNodes, kHubEdges + 1);
    const double bytes = static_cast<double>(n) * (f * 4 + 8) + 2.0 * kNodes * f * 4;
    int turn = 0;
    auto call = [&](const Options& o) {
      index_add(out, (turn++ & 1) != 0 ? second : first, src, 1.0, o);
    };
    auto add = [&](const std::string& variant, const Options& o) {
      const LoopTime t = loop_ms([&] { call(o); }, calls);
      r.add({"short", "index_add", shape, variant, std::string(to_string(*o.level)), t.gpu_ms,
             bytes, fmt::format("host {:.1f} us per call", t.host_ms * 1e3)});
    };
    for (const auto& v : list_variants("index_add")) {
      if (v.backend != DeviceType::cuda)
        continue;
      const Options o{.level = v.level, .variant = v.name};
      try {
        call(o);
        synchronize(Device::cuda());
      } catch (const InvalidArgument&) {
        continue; // the variant does not take this shape
      }
      add(v.name, o);
    }
    // The level's own choice, and the pull with other numbers of rows in flight (same bits).
    const Options r2r{.level = Determinism::run_to_run};
    add("run_to_run's choice", r2r);
    for (const int batch : {4, 8, 16}) {
      const detail::TuningGuard<detail::ScatterTuning> g({.pull_batch = batch});
      add(fmt::format("run_to_run's choice [{} rows in flight]", batch), r2r);
    }
    const detail::TuningGuard<detail::ScatterTuning> alt({.alternative = true});
    add("run_to_run's choice [alternative launch]", r2r);
  }
  synchronize(Device::cuda()); // a deferred error is thrown here, inside the family
}

} // namespace samebits::bench

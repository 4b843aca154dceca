// The backend-ops harness on CUDA (tests/harness/runner.hpp says what it checks): every generated
// case, every CUDA variant and level, each result against the float64 reference and, at
// portable, bitwise against the CPU's portable result, under five launch configurations.
//
// Among the cases, the one that shows CUDA index_add ignoring alpha where src or out has strided
// features (the general pull path) is, for instance,
//   index_add[alpha=-0.75] f32/... in=strided out=contiguous small   (SAMEBITS_TEST_FILTER=
//   'index_add[alpha=-0.75] f32' narrows a run to its family): at portable it is not bitwise
// equal to the CPU and is far from the float64 reference.
#include "core/tuning.hpp"
#include "harness/runner.hpp"
#include "ops/histogram_choice.hpp"
#include "ops/reduce_choice.hpp"
#include "ops/scan_choice.hpp"
#include "ops/scatter_choice.hpp"
#include "ops/segment_choice.hpp"

#include <memory>
#include <string>
#include <utility>

namespace samebits {
namespace {

// Every launch configuration the CUDA families have, set through their tunings (core/tuning.hpp):
// the default, each family's alternative, small blocks on a small grid, and each pull batch.
struct Tunings {
  detail::ScatterTuning scatter;
  detail::SegmentTuning segment;
  detail::ScanTuning scan;
  detail::HistogramTuning histogram;
  detail::ReduceTuning reduce;
};

// Holds each family's tuning for as long as a configuration runs.
struct TuningGuards {
  explicit TuningGuards(const Tunings& t)
      : scatter(t.scatter), segment(t.segment), scan(t.scan), histogram(t.histogram),
        reduce(t.reduce) {}
  detail::TuningGuard<detail::ScatterTuning> scatter;
  detail::TuningGuard<detail::SegmentTuning> segment;
  detail::TuningGuard<detail::ScanTuning> scan;
  detail::TuningGuard<detail::HistogramTuning> histogram;
  detail::TuningGuard<detail::ReduceTuning> reduce;
};

harness::Config tuned(std::string name, Tunings t) {
  return {std::move(name),
          [t]() -> std::shared_ptr<void> { return std::make_shared<TuningGuards>(t); }};
}

std::vector<harness::Config> launch_configs() {
  Tunings alternative, small, batch16, plain;
  alternative.scatter.alternative = true;
  small.reduce = {.block = 64, .grid = 2};
  small.segment.block_threads = 64;
  batch16.scatter.pull_batch = 16;
  batch16.segment.batch = 16;
  plain.scan.alternative = plain.histogram.alternative = true;
  plain.scatter.pull_batch = 4;
  plain.segment = {.block_threads = 128,
                   .allow_vector = false,
                   .allow_staged = false,
                   .allow_prefetch = false,
                   .batch = 4};
  return {tuned("default launch", {}), tuned("scatter alternative", alternative),
          tuned("block 64, grid 2", small), tuned("pull batch 16", batch16),
          tuned("alternative launch, plain segment kernels", plain)};
}

TEST(BackendOpsGpu, EveryCaseOnCudaAgainstTheCpu) {
  SAMEBITS_REQUIRE_CUDA();
  set_plan_cache_limit(0); // every call sorts: plan reuse has its own tests
  harness::Runner runner(Device::cuda(), launch_configs());
  const harness::Totals t = runner.run_all();
  if (!harness::narrowed()) {
    EXPECT_GT(t.cases, 5000);
  }
  EXPECT_EQ(t.failures, 0);
}

} // namespace
} // namespace samebits

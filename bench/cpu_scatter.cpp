// CPU benchmarks of index_add, scatter_add, scatter_reduce and the index plan: every variant side
// by side on the anchor shapes of docs/anchors.md, scaled down 4x in sources for the CPU
// (targets scaled too where the anchor has 100k or more).
#include "cpu_common.hpp"

#include <fmt/format.h>

namespace samebits::bench {

namespace {

struct Shape3 {
  std::int64_t e, n, f;
};
// Anchors E=10M->1M F=1, 2M->100k F=64, 2M->1000 F=64, 1M->2708 F=128, and 1M->1000 F=1.
const Shape3 kShapes[] = {{2'500'000, 250'000, 1},
                          {500'000, 25'000, 64},
                          {500'000, 1000, 64},
                          {250'000, 2708, 128},
                          {1'000'000, 1000, 1}};

// Variant ids: what each benchmark row runs.
enum Kind : int {
  atomic = 0,
  sorted_pull = 1,
  column_sweep = 2,
  plan_reused = 3,
  plan_build = 4,
  target_sweep = 5
};
const char* kKindNames[] = {"cpu.atomic",           "cpu.sorted_pull",
                            "cpu.column_sweep",     "cpu.plan_pull (plan reused)",
                            "make_index_plan only", "cpu.target_sweep"};

Options kind_options(int kind) {
  if (kind == atomic)
    return {.level = Determinism::not_guaranteed, .variant = "cpu.atomic"};
  return {.level = Determinism::portable, .variant = kKindNames[kind]};
}

void set_counters(benchmark::State& s, const Shape3& sh, int kind, std::string_view extra = {}) {
  // bytes that must move: src, index, out read once and written once
  const double bytes = static_cast<double>(sh.e) * sh.f * 4 + sh.e * 8.0 + 2.0 * sh.n * sh.f * 4;
  s.SetBytesProcessed(static_cast<std::int64_t>(bytes) * s.iterations());
  s.SetLabel(fmt::format("E={} N={} F={} {}{} threads={}", sh.e, sh.n, sh.f, kKindNames[kind],
                         extra, num_threads()));
}

void BM_index_add(benchmark::State& s) {
  const Shape3 sh = kShapes[s.range(0)];
  const int kind = static_cast<int>(s.range(1));
  Tensor src = normal({sh.e, sh.f});
  Tensor index = indices(sh.e, sh.n);
  Tensor out = normal({sh.n, sh.f}, DType::f32, 3);
  IndexPlan plan;
  if (kind == plan_reused)
    plan = make_index_plan(index, sh.n);
  for (auto _ : s) {
    if (kind == plan_reused)
      index_add(out, plan, src);
    else if (kind == plan_build)
      plan = make_index_plan(index, sh.n);
    else
      index_add(out, index, src, 1.0, kind_options(kind));
    benchmark::ClobberMemory();
  }
  set_counters(s, sh, kind);
}
BENCHMARK(BM_index_add)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4, 5}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// scatter_add with the index expanded over the features (stride 0), as PyG builds it.
void BM_scatter_add(benchmark::State& s) {
  const Shape3 sh = kShapes[s.range(0)];
  const int kind = static_cast<int>(s.range(1));
  Tensor src = normal({sh.e, sh.f});
  Tensor vec = indices(sh.e, sh.n);
  TensorView index = vec.view();
  index.ndim = 2;
  index.shape = {sh.e, sh.f, 0, 0};
  index.strides = {1, 0, 0, 0};
  Tensor out = normal({sh.n, sh.f}, DType::f32, 3);
  for (auto _ : s) {
    scatter_add(out, 0, index, src, kind_options(kind));
    benchmark::ClobberMemory();
  }
  set_counters(s, sh, kind);
}
BENCHMARK(BM_scatter_add)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2, 5}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// scatter_reduce mean and amax (include_self = false) on the GraphSAGE-like shape.
void BM_scatter_reduce(benchmark::State& s) {
  const Shape3 sh = kShapes[3];
  const int kind = static_cast<int>(s.range(0));
  const auto reduce = static_cast<Reduce>(s.range(1));
  Tensor src = normal({sh.e, sh.f});
  Tensor vec = indices(sh.e, sh.n);
  TensorView index = vec.view();
  index.ndim = 2;
  index.shape = {sh.e, sh.f, 0, 0};
  index.strides = {1, 0, 0, 0};
  Tensor out = normal({sh.n, sh.f}, DType::f32, 3);
  for (auto _ : s) {
    scatter_reduce(out, 0, index, src, reduce, false, kind_options(kind));
    benchmark::ClobberMemory();
  }
  set_counters(s, sh, kind, std::string(" ").append(to_string(reduce)));
}
BENCHMARK(BM_scatter_reduce)
    ->ArgsProduct({{0, 1, 2, 5}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace

} // namespace samebits::bench

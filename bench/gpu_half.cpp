// GPU benchmarks of bfloat16/float16 ops: the MoE token combine, an index_add of
// [131072 x 4096] expert output rows into 65536 tokens (top-2 routing: every token receives
// exactly two rows, in shuffled order), at every level; the ratio to our own atomic variant of
// the same op and shape is what the criterion reads (run_to_run at most 1.0x cuda.half_atomic).
#include "gpu_common.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>
#include <random>

namespace samebits::bench {

namespace {

// Top-2 routing: token t appears twice among the rows, positions shuffled with a fixed seed.
Tensor top2_index(std::int64_t tokens) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(2 * tokens));
  std::iota(idx.begin(), idx.end(), 0);
  for (auto& v : idx)
    v %= tokens;
  std::shuffle(idx.begin(), idx.end(), std::mt19937_64(26));
  return Tensor::from_vector(idx, {2 * tokens}, Device::cuda());
}

void bench_combine(Report& r, DType dt, std::int64_t tokens, std::int64_t features) {
  const std::int64_t rows = 2 * tokens;
  const std::string shape =
      fmt::format("MoE combine {} [{} x {}] into {}", to_string(dt), rows, features, tokens);
  const Tensor src = gpu_normal({rows, features}, dt, 1);
  Tensor out = gpu_normal({tokens, features}, dt, 3);
  const Tensor index = top2_index(tokens);
  // src read once, out read and written once, the index read once.
  const double bytes =
      2.0 * (static_cast<double>(rows) * features + 2.0 * static_cast<double>(tokens) * features) +
      8.0 * rows;
  const int reps = r.quick ? 5 : 20;
  const std::string op = fmt::format("index_add {}", to_string(dt));
  auto row = [&](const std::string& variant, Determinism level, double ms, const char* note) {
    r.add({"half", op, shape, variant, std::string(to_string(level)), ms, bytes, note});
  };
  set_plan_cache_limit(0); // sort on every call, as for a fresh routing
  for (Determinism level :
       {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable}) {
    // The variant each level selects, named so that the row says what ran (the selection's
    // explanation also names the variants it passed over).
    const char* variant =
        level == Determinism::not_guaranteed ? "cuda.half_atomic" : "cuda.half_sort_pull";
    const Options o{.level = level, .variant = variant};
    index_add(out, index, src, 1.0, o);
    row(variant, level, time_ms([&] { index_add(out, index, src, 1.0, o); }, reps),
        level == Determinism::not_guaranteed ? "16-bit atomicAdd (as PyTorch)" : "sort every call");
  }
  {
    const AutomaticPlanReuse on;
    const Options o{.level = Determinism::run_to_run};
    row("cuda.half_sort_pull (same index again)", Determinism::run_to_run,
        time_ms([&] { index_add(out, index, src, 1.0, o); }, reps), "automatic plan reuse");
  }
  const IndexPlan plan = make_index_plan(index, tokens);
  row("cuda.half_plan_pull (plan reused)", Determinism::portable,
      time_ms([&] { index_add(out, plan, src); }, reps), "plan built once");
}

} // namespace

void bench_half(Report& r) {
  if (r.quick) {
    bench_combine(r, DType::bf16, 8192, 4096);
    return;
  }
  bench_combine(r, DType::bf16, 65536, 4096);
  bench_combine(r, DType::f16, 65536, 4096);
}

} // namespace samebits::bench

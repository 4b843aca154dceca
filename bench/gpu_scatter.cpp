// GPU benchmarks of index_add, scatter_add and scatter_reduce: every CUDA variant on the anchor
// shapes of docs/anchors.md plus large shapes, including the plan reused across calls and the
// sort done on every call (automatic plan reuse off, so the index is sorted on every call as a
// fresh one would be), and the same index passed again with automatic plan reuse on.
#include "gpu_common.hpp"

#include <fmt/format.h>
#include <functional>

namespace samebits::bench {

namespace {

struct Shape3 {
  std::int64_t e, n, f;
  const char* name;
};

const Shape3 kAnchors[] = {{10'000'000, 1'000'000, 1, "E=10M N=1M F=1"},
                           {2'000'000, 100'000, 64, "E=2M N=100k F=64"},
                           {2'000'000, 1000, 64, "E=2M N=1000 F=64"},
                           {1'000'000, 2708, 128, "E=1M N=2708 F=128"},
                           {1'000'000, 1000, 1, "E=1M N=1000 F=1"}};
const Shape3 kLarge[] = {{100'000'000, 10'000'000, 1, "E=100M N=10M F=1"},
                         {8'000'000, 1'000'000, 64, "E=8M N=1M F=64"}};

double bytes_of(const Shape3& s) {
  return static_cast<double>(s.e) * s.f * 4 + s.e * 8.0 + 2.0 * s.n * s.f * 4;
}

TensorView expanded(const Tensor& vec, std::int64_t e, std::int64_t f) {
  TensorView v = vec.view();
  v.ndim = 2;
  v.shape = {e, f, 0, 0};
  v.strides = {1, 0, 0, 0};
  return v;
}

void bench_shape(Report& r, const Shape3& s) {
  Tensor src = gpu_normal({s.e, s.f});
  Tensor index = gpu_index(s.e, s.n);
  Tensor out = gpu_normal({s.n, s.f}, DType::f32, 3);
  const double bytes = bytes_of(s);
  const int reps = r.quick ? 10 : 50;
  auto add = [&](const char* op, const std::string& variant, Determinism level, double ms,
                 const char* note) {
    r.add({"scatter", op, s.name, variant, std::string(to_string(level)), ms, bytes, note});
  };
  // Times fn with the variant forced; a variant that does not take this shape (cuda.fixed_point:
  // rows of more than 4 features) is left out.
  auto each_variant = [&](const char* op, const char* row_op, const char* note_det,
                          const std::function<void(const Options&)>& fn) {
    for (const auto& v : list_variants(op)) {
      if (v.backend != DeviceType::cuda)
        continue;
      const Options o{.level = v.level, .variant = v.name};
      try {
        fn(o);
      } catch (const InvalidArgument&) {
        continue;
      }
      const bool sorts = v.name.find("sort") != std::string::npos;
      add(row_op, v.name, v.level, time_ms([&] { fn(o); }, reps),
          v.level == Determinism::not_guaranteed
              ? ""
              : (sorts ? note_det : "no sort: fixed-point sums"));
    }
  };
  each_variant("index_add", "index_add", "sort every call",
               [&](const Options& o) { index_add(out, index, src, 1.0, o); });
  {
    // The same index on every call, nothing else changed: the first call remembers it, the next
    // builds its plan, the rest compare the index with the copy and reuse the plan.
    const AutomaticPlanReuse on;
    add("index_add", "cuda.sort_pull (same index again)", Determinism::portable,
        time_ms([&] { index_add(out, index, src, 1.0, {.level = Determinism::portable}); }, reps),
        "automatic plan reuse");
  }
  const IndexPlan plan = make_index_plan(index, s.n);
  add("index_add", "cuda.plan_pull (plan reused)", Determinism::portable,
      time_ms([&] { index_add(out, plan, src); }, reps), "plan built once");
  add("index_add", "make_index_plan (alone)", Determinism::portable,
      time_ms([&] { (void)make_index_plan(index, s.n); }, reps), "building the plan");
  if (s.f >= 64) {
    // The same source rows read in the plan's order, written out in full: what a random row
    // gather alone reaches on this GPU (bytes: the rows read once and written once).
    Tensor gathered = Tensor::empty({s.e, s.f}, DType::f32, Device::cuda());
    const double gather_bytes = 2.0 * static_cast<double>(s.e) * s.f * 4 + s.e * 8.0;
    r.add({"scatter", "row gather (reference)", s.name, "index_select by the plan's order",
           "portable", time_ms([&] { index_select(src, 0, plan.order, gathered); }, reps),
           gather_bytes, "random rows in, contiguous rows out"});
  }
  const TensorView xi = expanded(index, s.e, s.f);
  each_variant("scatter_add", "scatter_add", "index expanded over features",
               [&](const Options& o) { scatter_add(out, 0, xi, src, o); });
  each_variant("scatter_reduce", "scatter_reduce mean", "include_self=false",
               [&](const Options& o) { scatter_reduce(out, 0, xi, src, Reduce::mean, false, o); });
}

} // namespace

void bench_scatter(Report& r) {
  set_plan_cache_limit(0); // the same index is passed on every call: sort every call means it
  for (const auto& s : kAnchors)
    bench_shape(r, s);
  if (!r.quick)
    for (const auto& s : kLarge)
      bench_shape(r, s);
}

} // namespace samebits::bench

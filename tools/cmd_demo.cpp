// `samebits demo`: the same reduction run repeatedly, at not_guaranteed and at run_to_run, with
// the distinct results counted by hash. Shows the problem and the fix in a few seconds.
#include <fmt/format.h>

#include <iostream>
#include <random>
#include <set>

#include "commands.hpp"
#include "samebits/samebits.hpp"

namespace samebits::cli {

namespace {

struct DemoOptions {
  int runs = 20;
  std::int64_t n = 1 << 22;
  unsigned seed = 1;
};

void run_demo(const DemoOptions& o) {
  std::mt19937_64 gen(o.seed);
  std::normal_distribution<float> normal;
  std::vector<float> xs(static_cast<std::size_t>(o.n));
  for (auto& v : xs) v = normal(gen);
  Tensor x = Tensor::from_vector(xs, {o.n});
  Tensor out = Tensor::empty({1}, DType::f32);
  fmt::print("sum of {} random floats, {} runs, {} CPU threads\n", o.n, o.runs, num_threads());
  for (auto level : {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable}) {
    std::set<std::uint64_t> hashes;
    float first = 0, lo = 0, hi = 0;
    for (int r = 0; r < o.runs; ++r) {
      sum(x, out, {.level = level});
      const float v = out.data<float>()[0];
      if (r == 0) first = lo = hi = v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      hashes.insert(content_hash(out));
    }
    fmt::print("  {:<15} {:>3} distinct results   first {:.9g}   spread {:.3g}   ran {}\n",
               to_string(level), hashes.size(), first, static_cast<double>(hi) - lo,
               list_variants("sum").empty() ? "" : last_explain().substr(0, last_explain().find(':', last_explain().find("ran"))));
  }
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo", "Run one op repeatedly at each determinism level and "
                                         "count distinct results");
  cmd->add_option("--runs", o->runs, "Repetitions per level")->check(CLI::Range(1, 100000));
  cmd->add_option("-n,--size", o->n, "Number of elements")->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--seed", o->seed, "Seed of the random input");
  cmd->callback([o] { run_demo(*o); });
}

}  // namespace samebits::cli

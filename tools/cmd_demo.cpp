// `samebits demo`: the same index_add (a scatter of E source rows into N target rows) run
// repeatedly at each determinism level, on the CPU and on CUDA when present, with the distinct
// results counted by content hash. Shows the problem (several results at not_guaranteed) and the
// fix (exactly one at run_to_run and portable, and the same bits on the CPU and the GPU).
#include "commands.hpp"
#include "samebits/samebits.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <random>
#include <set>

namespace samebits::cli {

namespace {

struct DemoOptions {
  int runs = 20;
  std::int64_t edges = 1 << 20; // source rows E
  std::int64_t nodes = 1000;    // target rows N
  std::int64_t features = 4;    // F
  std::uint64_t seed = 1;
  std::string device = "all"; // cpu, cuda or all
};

// The variant name out of last_explain() ("op on cpu at level: ran NAME (...)...").
std::string ran_variant() {
  const std::string& e = last_explain();
  const auto at = e.find("ran ");
  if (at == std::string::npos)
    return "?";
  const auto end = e.find_first_of(" (", at + 4);
  return e.substr(at + 4, end - at - 4);
}

struct LevelResult {
  std::size_t distinct = 0;
  double spread = 0; // largest difference of one element between runs
  std::string variant;
  std::uint64_t first_hash = 0;
};

LevelResult run_level(const Tensor& src, const Tensor& index, std::int64_t nodes, int runs,
                      Determinism level, const IndexPlan* plan) {
  LevelResult r;
  std::set<std::uint64_t> hashes;
  std::vector<float> lo, hi;
  const Device dev = src.device();
  for (int i = 0; i < runs; ++i) {
    Tensor out = Tensor::zeros({nodes, src.size(1)}, DType::f32, dev);
    if (plan != nullptr)
      index_add(out, *plan, src, 1.0, {.level = level});
    else
      index_add(out, index, src, 1.0, {.level = level});
    if (i == 0)
      r.variant = ran_variant();
    const auto h = content_hash(out);
    if (i == 0)
      r.first_hash = h;
    hashes.insert(h);
    const auto v = out.to_vector<float>();
    if (lo.empty())
      lo = hi = v;
    for (std::size_t k = 0; k < v.size(); ++k) {
      lo[k] = std::min(lo[k], v[k]);
      hi[k] = std::max(hi[k], v[k]);
    }
  }
  for (std::size_t k = 0; k < lo.size(); ++k)
    r.spread = std::max(r.spread, static_cast<double>(hi[k]) - lo[k]);
  r.distinct = hashes.size();
  return r;
}

void run_demo(const DemoOptions& o) {
  std::mt19937_64 gen(o.seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<std::int64_t> pick(0, o.nodes - 1);
  std::vector<float> xs(static_cast<std::size_t>(o.edges * o.features));
  for (auto& v : xs)
    v = normal(gen);
  std::vector<std::int64_t> is(static_cast<std::size_t>(o.edges));
  for (auto& v : is)
    v = pick(gen);
  const Tensor src_cpu = Tensor::from_vector(xs, {o.edges, o.features});
  const Tensor index_cpu = Tensor::from_vector(is, {o.edges});

  std::vector<Device> devices;
  if (o.device == "cpu" || o.device == "all")
    devices.push_back(Device::cpu());
  if (o.device == "cuda" || o.device == "all") {
    if (cuda_available())
      devices.push_back(Device::cuda());
    else if (o.device == "cuda")
      throw BackendUnavailable("demo: no CUDA device present");
    else
      fmt::print("(no CUDA device: CPU only)\n");
  }
  fmt::print("index_add of {} rows x {} features into {} rows, {} runs per level, seed {}\n",
             o.edges, o.features, o.nodes, o.runs, o.seed);
  std::map<std::string, std::uint64_t> portable_hash;
  for (const Device dev : devices) {
    const std::string where =
        dev.is_cpu() ? fmt::format("cpu ({} threads)", num_threads()) : to_string(dev);
    fmt::print("\n{}\n", where);
    const Tensor src = src_cpu.to(dev), index = index_cpu.to(dev);
    const IndexPlan plan = make_index_plan(index, o.nodes);
    struct Row {
      Determinism level;
      const IndexPlan* plan;
      const char* label;
    };
    const Row rows[] = {{Determinism::not_guaranteed, nullptr, "not_guaranteed"},
                        {Determinism::run_to_run, nullptr, "run_to_run"},
                        {Determinism::portable, nullptr, "portable"},
                        {Determinism::portable, &plan, "portable, plan"}};
    for (const auto& row : rows) {
      const LevelResult r = run_level(src, index, o.nodes, o.runs, row.level, row.plan);
      fmt::print("  {:<16} {:>4} distinct result{}   max spread {:<10.3g} ran {}\n", row.label,
                 r.distinct, r.distinct == 1 ? " " : "s", r.spread, r.variant);
      if (row.level == Determinism::portable && row.plan == nullptr)
        portable_hash[to_string(dev)] = r.first_hash;
    }
  }
  if (portable_hash.size() > 1) {
    const bool same = std::all_of(portable_hash.begin(), portable_hash.end(), [&](const auto& kv) {
      return kv.second == portable_hash.begin()->second;
    });
    fmt::print("\nportable result on CPU and CUDA: {} (hash {})\n",
               same ? "the same bits" : "DIFFERENT bits", hash_hex(portable_hash.begin()->second));
  }
}

} // namespace

void add_demo_command(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd =
      app.add_subcommand("demo", "Run one index_add repeatedly at each determinism level, on the "
                                 "CPU and CUDA, and count distinct results");
  cmd->add_option("--runs", o->runs, "Repetitions per level")
      ->check(integer_in(1, 100000))
      ->capture_default_str();
  cmd->add_option("-e,--edges", o->edges, "Source rows E")
      ->check(integer_in(1, std::int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("-n,--nodes", o->nodes, "Target rows N")
      ->check(integer_in(1, std::int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("-f,--features", o->features, "Features per row F")
      ->check(integer_in(1, 4096))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random input")
      ->check(seed_value())
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or all (CUDA only when present)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  cmd->callback([o] { run_demo(*o); });
}

} // namespace samebits::cli

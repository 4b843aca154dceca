// The reproducibility experiment: repeated trainings per device and level, distinct weight sets,
// weight drift per epoch, the seed spread, and the text table and JSON of the results.
#include "samebits/app/experiment.hpp"

#include "samebits/environment.hpp"
#include "samebits/samebits.hpp"
#include "samebits/trace.hpp"
#include "samebits/util/host_values.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fmt/format.h>
#include <set>
#include <thread>

namespace samebits::nn {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> host_doubles(const Tensor& t) {
  return detail::host_values<double>(t);
}

// The larger of two differences, NaN winning (std::max drops a NaN in its second argument): a
// diverged run must show.
double max_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = max_nan(m, std::fabs(a[i] - b[i]));
  return m;
}

struct Stats {
  double mean = 0, std = 0, min = 0, max = 0;
};
Stats stats(const std::vector<double>& v) {
  Stats s;
  if (v.empty())
    return s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (double x : v)
    s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v)
    s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size()));
  return s;
}

// Runs one group: `runs` trainings, with seed = base (repeat) or base + r (seeds). Returns false
// when should_stop answered true after a run (the group is then incomplete).
bool run_group(GraphSage& model, const ExperimentConfig& cfg, GroupResult& g,
               const std::function<void(const Progress&)>& progress,
               const std::function<bool()>& should_stop) {
  const bool by_seed = g.kind == "seeds";
  const int tracked = std::min(cfg.track_runs, g.runs);
  std::vector<std::vector<double>> run1_epochs; // run 1's parameters after each epoch
  std::vector<double> run1_final;
  g.diff_per_epoch.assign(static_cast<std::size_t>(cfg.epochs) + 1, 0.0);
  for (int r = 0; r < g.runs; ++r) {
    const auto t0 = Clock::now();
    const bool track = r < tracked;
    const std::uint64_t seed = cfg.seed + (by_seed ? static_cast<std::uint64_t>(r) : 0);
    // Names this run in a trace that holds several (see samebits diff).
    const trace::Context context(fmt::format("{} {} {} run {} of {}, seed {}", to_string(g.device),
                                             to_string(g.level), g.kind, r + 1, g.runs, seed));
    model.init(seed);
    auto record = [&](int e) {
      std::vector<double> w = host_doubles(model.parameters());
      if (r == 0) {
        run1_epochs.push_back(std::move(w));
      } else {
        auto& d = g.diff_per_epoch[static_cast<std::size_t>(e)];
        d = max_nan(d, max_abs_diff(w, run1_epochs[static_cast<std::size_t>(e)]));
      }
    };
    if (track)
      record(0);
    for (int e = 0; e < cfg.epochs; ++e) {
      const double loss = model.train_epoch(r == 0);
      if (r == 0)
        g.loss_run1.push_back(loss);
      if (track)
        record(e + 1);
    }
    g.test_acc.push_back(model.accuracy(Split::test));
    g.hashes.push_back(model.parameter_hash());
    std::vector<double> w = track && r == 0 ? run1_epochs.back() : host_doubles(model.parameters());
    if (r == 0)
      run1_final = std::move(w);
    else
      g.max_weight_diff = max_nan(g.max_weight_diff, max_abs_diff(w, run1_final));
    g.seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (progress)
      progress({&g, r + 1, g.runs});
    if (should_stop && should_stop() && r + 1 < g.runs)
      return false;
  }
  return true;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Sets the CPU thread count for its lifetime and restores the previous one.
class ThreadsFor {
public:
  explicit ThreadsFor(int n) : previous_(num_threads()) {
    if (n != previous_)
      set_num_threads(n);
  }
  ~ThreadsFor() {
    if (num_threads() != previous_)
      set_num_threads(previous_);
  }
  ThreadsFor(const ThreadsFor&) = delete;
  ThreadsFor& operator=(const ThreadsFor&) = delete;

private:
  int previous_;
};

std::string device_name(Device d) {
  return std::string(to_string(d));
}

// The variants the model's samebits ops run at `level` (selection is a pure function).
std::string variants_used(Device d, Determinism level) {
  std::string out;
  for (const char* op : {"aggregate", "gemm", "sum_dim"}) {
    const SelectionPreview p = preview_selection(op, d.type, level);
    out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", op, p.runs ? p.variant : "none");
  }
  return out;
}

} // namespace

std::string verdict(const GroupResult& g) {
  const int d = g.distinct();
  if (g.runs < 2)
    return fmt::format("{} {}: reproducible: not tested (1 run; give --runs 2 or more)",
                       device_name(g.device), to_string(g.level));
  return fmt::format("{} {}: reproducible: {}, {} distinct weight set{} in {} runs",
                     device_name(g.device), to_string(g.level), d == 1 ? "yes" : "no", d,
                     d == 1 ? "" : "s", g.runs);
}

int GroupResult::distinct() const {
  return static_cast<int>(std::set<std::uint64_t>(hashes.begin(), hashes.end()).size());
}

int race_threads_default() {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(2 * hw, 16, 1024);
}

int group_threads(const ExperimentConfig& cfg, Device device, Determinism level, int threads) {
  if (!device.is_cpu() || level != Determinism::not_guaranteed || cfg.race_threads < 0)
    return threads;
  return cfg.race_threads > 0 ? cfg.race_threads : std::max(threads, race_threads_default());
}

Dataset load_experiment_data(const ExperimentConfig& cfg, std::filesystem::path* dir) {
  const std::filesystem::path d = cfg.data.empty() ? bundled_data_dir("cora") : cfg.data;
  if (dir != nullptr)
    *dir = d;
  LoadOptions lo;
  if (cfg.check_cora)
    lo.expect = cora_expected();
  return load_dataset(d, lo);
}

ExperimentResult run_experiment(const ExperimentConfig& cfg,
                                const std::function<void(const Progress&)>& progress) {
  std::filesystem::path dir;
  const Dataset data = load_experiment_data(cfg, &dir);
  ExperimentResult r = run_experiment(cfg, data, progress);
  r.data_dir = dir.string();
  return r;
}

ExperimentResult run_experiment(const ExperimentConfig& cfg, const Dataset& data,
                                const std::function<void(const Progress&)>& progress,
                                const std::function<bool()>& should_stop) {
  if (cfg.runs < 1)
    throw InvalidArgument("experiment: --runs must be at least 1");
  if (cfg.epochs < 1)
    throw InvalidArgument("experiment: --epochs must be at least 1");
  if (cfg.devices.empty() || cfg.levels.empty())
    throw InvalidArgument("experiment: at least one device and one level are needed");
  for (Device d : cfg.devices)
    if (d.is_cuda() && !cuda_available())
      throw BackendUnavailable(
          cuda_built() ? "experiment: --device cuda, but no CUDA device is present"
                       : "experiment: --device cuda, but samebits was built without CUDA");
  ExperimentResult res;
  res.started = utc_now();
  res.config = cfg;
  res.data_dir = cfg.data.string();
  res.dataset = data.name;
  res.nodes = data.num_nodes;
  res.edges = data.num_edges();
  res.features = data.num_features;
  res.classes = data.num_classes;
  res.train = static_cast<std::int64_t>(data.nodes_in(Split::train).size());
  res.test = static_cast<std::int64_t>(data.nodes_in(Split::test).size());
  res.threads = num_threads();
  res.duplicate_edges = data.duplicate_edges;
  res.first_duplicate = data.first_duplicate;
  res.environment = nlohmann::json::parse(samebits::environment_json());

  // One group: false when it was cut short (res then says where, and holds the groups before).
  auto run_one = [&](SageConfig mc, const char* kind, int runs) {
    const ThreadsFor threads(group_threads(cfg, mc.device, mc.level, res.threads));
    GraphSage model(data, mc);
    GroupResult g;
    g.variants = variants_used(mc.device, mc.level);
    g.kind = kind;
    g.device = mc.device;
    g.level = mc.level;
    g.runs = runs;
    g.threads = num_threads();
    if (!run_group(model, cfg, g, progress, should_stop)) {
      res.complete = false;
      res.interrupted =
          fmt::format("{} {}{}: {} of {} runs done", device_name(g.device), to_string(g.level),
                      g.kind == "seeds" ? " (seeds)" : "", g.hashes.size(), g.runs);
      return false;
    }
    res.groups.push_back(std::move(g));
    return true;
  };
  auto stopped = [&] {
    if (!should_stop || !should_stop())
      return false;
    res.complete = false;
    if (res.interrupted.empty())
      res.interrupted = "between groups (no group was cut short)";
    return true;
  };
  auto run_all = [&] {
    for (Device dev : cfg.devices) {
      SageConfig mc = cfg.model;
      mc.device = dev;
      for (Determinism level : cfg.levels) {
        mc.level = level;
        if (stopped() || !run_one(mc, "repeat", cfg.runs))
          return;
      }
      if (cfg.seeds > 0) {
        mc.level = *std::max_element(cfg.levels.begin(), cfg.levels.end());
        if (stopped() || !run_one(mc, "seeds", cfg.seeds))
          return;
      }
    }
  };
  run_all();
  res.finished = utc_now();
  return res;
}

CrossDevice cross_device_check(const ExperimentResult& r) {
  CrossDevice c;
  for (const auto& g : r.groups)
    if (g.kind == "repeat" && g.level == Determinism::portable && !g.hashes.empty())
      c.hashes.emplace_back(device_name(g.device), hash_hex(g.hashes.front()));
  c.applicable = c.hashes.size() >= 2;
  const auto cpu = std::count_if(c.hashes.begin(), c.hashes.end(),
                                 [](const auto& h) { return h.first == "cpu"; });
  c.cpu_and_gpu = cpu > 0 && cpu < static_cast<std::ptrdiff_t>(c.hashes.size());
  c.equal = c.applicable && std::all_of(c.hashes.begin(), c.hashes.end(), [&](const auto& h) {
              return h.second == c.hashes.front().second;
            });
  return c;
}

nlohmann::json to_json(const ExperimentResult& r) {
  using nlohmann::json;
  json j;
  const auto& c = r.config;
  j["experiment"] = "graphsage";
  j["dataset"] = {{"name", r.dataset},      {"nodes", r.nodes},     {"edges", r.edges},
                  {"features", r.features}, {"classes", r.classes}, {"train", r.train},
                  {"test", r.test}};
  json devs = json::array(), levels = json::array();
  for (auto d : c.devices)
    devs.push_back(device_name(d));
  for (auto l : c.levels)
    levels.push_back(std::string(to_string(l)));
  j["complete"] = r.complete;
  if (!r.complete)
    j["interrupted"] = r.interrupted;
  j["command"] = r.command;
  j["started"] = r.started;
  j["finished"] = r.finished;
  j["config"] = {{"data", r.data_dir},       {"runs", c.runs},
                 {"epochs", c.epochs},       {"devices", devs},
                 {"levels", levels},         {"seeds", c.seeds},
                 {"seed", c.seed},           {"threads", r.threads},
                 {"hidden", c.model.hidden}, {"dropout", c.model.dropout},
                 {"lr", c.model.lr},         {"weight_decay", c.model.weight_decay},
                 {"beta1", c.model.beta1},   {"beta2", c.model.beta2},
                 {"eps", c.model.eps},       {"track_runs", c.track_runs}};
  j["dataset"]["duplicate_edges"] = r.duplicate_edges;
  json groups = json::array();
  for (const auto& g : r.groups) {
    const Stats a = stats(g.test_acc), t = stats(g.seconds);
    json hashes = json::array();
    for (auto h : g.hashes)
      hashes.push_back(hash_hex(h));
    groups.push_back({{"kind", g.kind},
                      {"device", device_name(g.device)},
                      {"level", std::string(to_string(g.level))},
                      {"runs", g.runs},
                      {"distinct_weight_sets", g.distinct()},
                      {"first_hash", g.hashes.empty() ? "" : hash_hex(g.hashes.front())},
                      {"test_accuracy",
                       {{"mean", a.mean},
                        {"std", a.std},
                        {"min", a.min},
                        {"max", a.max},
                        {"values", g.test_acc}}},
                      {"max_weight_diff", g.max_weight_diff},
                      {"weight_diff_per_epoch", g.diff_per_epoch},
                      {"loss_run1", g.loss_run1},
                      {"seconds_per_run", t.mean},
                      {"seconds_total", t.mean * static_cast<double>(g.runs)},
                      {"seconds_min", t.min},
                      {"variants", g.variants},
                      {"threads", g.threads},
                      {"hashes", hashes}});
  }
  j["groups"] = groups;
  const CrossDevice x = cross_device_check(r);
  json xh = json::object();
  for (const auto& [d, h] : x.hashes)
    xh[d] = h;
  j["cross_device"] = {{"applicable", x.applicable},
                       {"equal", x.equal},
                       {"cpu_and_gpu", x.cpu_and_gpu},
                       {"portable_hashes", xh}};
  j["environment"] = r.environment;
  return j;
}

std::string format_table(const ExperimentResult& r) {
  std::string s = fmt::format(
      "GraphSAGE on {}: {} nodes, {} edges, {} features, {} classes; {} epochs, hidden {}, "
      "{} CPU threads\n",
      r.dataset, r.nodes, r.edges, r.features, r.classes, r.config.epochs, r.config.model.hidden,
      r.threads);
  s += fmt::format("{:<7} {:<16} {:>6} {:>9}  {:>7} {:>7} {:>7} {:>7}  {:>12} {:>10}\n", "device",
                   "level", "runs", "distinct", "acc", "std", "min", "max", "max|w-w1|", "ms/run");
  for (const auto& g : r.groups) {
    const Stats a = stats(g.test_acc), t = stats(g.seconds);
    const std::string level = g.kind == "seeds" ? fmt::format("seeds/{}", to_string(g.level))
                                                : std::string(to_string(g.level));
    s += fmt::format(
        "{:<7} {:<16} {:>6} {:>9}  {:>7.4f} {:>7.4f} {:>7.4f} {:>7.4f}  {:>12.3g} {:>10.2f}\n",
        device_name(g.device), level, g.runs, g.distinct(), a.mean, a.std, a.min, a.max,
        g.max_weight_diff, t.mean * 1e3);
  }
  for (const auto& g : r.groups)
    if (g.kind == "repeat")
      s += verdict(g) + "\n";
  for (const auto& g : r.groups)
    if (g.device.is_cpu() && g.threads != r.threads)
      s += fmt::format("note: {} {} ran with {} threads (more than the cores), so that its "
                       "atomic adds race (--race-threads)\n",
                       device_name(g.device), to_string(g.level), g.threads);
  for (const auto& g : r.groups)
    if (g.kind == "repeat" && g.level == Determinism::not_guaranteed && g.distinct() == 1 &&
        g.runs > 1)
      s += fmt::format("note: {} not_guaranteed gave 1 weight set in {} runs. No variation seen "
                       "proves nothing: at not_guaranteed the order of atomic adds can change "
                       "with the thread count, the load, the machine or the GPU.\n",
                       device_name(g.device), g.runs);
  if (r.duplicate_edges > 0)
    s += fmt::format("note: the data set lists {} edge{} more than once (first: {}); each copy "
                     "counts in the neighbour mean\n",
                     r.duplicate_edges, r.duplicate_edges == 1 ? "" : "s", r.first_duplicate);
  if (!r.complete)
    s += fmt::format("INTERRUPTED: {}; the table shows the groups that completed\n", r.interrupted);
  for (const auto& g : r.groups) {
    const auto& loss = g.loss_run1;
    const auto bad =
        std::find_if(loss.begin(), loss.end(), [](double l) { return !std::isfinite(l); });
    if (bad != loss.end())
      s += fmt::format("note: {} {}: run 1's training loss is {} from epoch {} on: the training "
                       "diverged (try a smaller --lr)\n",
                       device_name(g.device), to_string(g.level), *bad, bad - loss.begin() + 1);
  }
  if (r.test == 0)
    s += "note: the data set has no test nodes: test accuracy is not defined (nan)\n";
  const CrossDevice x = cross_device_check(r);
  if (x.applicable) {
    std::string hs;
    for (const auto& [d, h] : x.hashes)
      hs += fmt::format(" {} {}", d, h);
    s +=
        fmt::format("portable weights, {}:{} -> {}\n", x.cpu_and_gpu ? "CPU vs CUDA" : "GPU vs GPU",
                    hs, x.equal ? "IDENTICAL" : "DIFFERENT");
  }
  return s;
}

} // namespace samebits::nn

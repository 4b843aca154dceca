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
#include <fmt/format.h>
#include <set>

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

// Runs one group: `runs` trainings, with seed = base (repeat) or base + r (seeds).
void run_group(GraphSage& model, const ExperimentConfig& cfg, GroupResult& g,
               const std::function<void(const Progress&)>& progress) {
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
  }
}

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

int GroupResult::distinct() const {
  return static_cast<int>(std::set<std::uint64_t>(hashes.begin(), hashes.end()).size());
}

ExperimentResult run_experiment(const ExperimentConfig& cfg,
                                const std::function<void(const Progress&)>& progress) {
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
  res.config = cfg;
  LoadOptions lo;
  if (cfg.check_cora)
    lo.expect = cora_expected();
  const Dataset data = load_dataset(cfg.data, lo);
  res.dataset = data.name;
  res.nodes = data.num_nodes;
  res.edges = data.num_edges();
  res.features = data.num_features;
  res.classes = data.num_classes;
  res.train = static_cast<std::int64_t>(data.nodes_in(Split::train).size());
  res.test = static_cast<std::int64_t>(data.nodes_in(Split::test).size());
  res.threads = num_threads();
  res.environment = nlohmann::json::parse(samebits::environment_json());

  for (Device dev : cfg.devices) {
    SageConfig mc = cfg.model;
    mc.device = dev;
    for (Determinism level : cfg.levels) {
      mc.level = level;
      GraphSage model(data, mc);
      GroupResult g;
      g.variants = variants_used(dev, level);
      g.kind = "repeat";
      g.device = dev;
      g.level = level;
      g.runs = cfg.runs;
      run_group(model, cfg, g, progress);
      res.groups.push_back(std::move(g));
    }
    if (cfg.seeds > 0) {
      mc.level = *std::max_element(cfg.levels.begin(), cfg.levels.end());
      GraphSage model(data, mc);
      GroupResult g;
      g.variants = variants_used(dev, mc.level);
      g.kind = "seeds";
      g.device = dev;
      g.level = mc.level;
      g.runs = cfg.seeds;
      run_group(model, cfg, g, progress);
      res.groups.push_back(std::move(g));
    }
  }
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
  j["config"] = {{"data", c.data.string()},  {"runs", c.runs},
                 {"epochs", c.epochs},       {"devices", devs},
                 {"levels", levels},         {"seeds", c.seeds},
                 {"seed", c.seed},           {"threads", r.threads},
                 {"hidden", c.model.hidden}, {"dropout", c.model.dropout},
                 {"lr", c.model.lr},         {"weight_decay", c.model.weight_decay},
                 {"beta1", c.model.beta1},   {"beta2", c.model.beta2},
                 {"eps", c.model.eps}};
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

// `samebits experiment graphsage`: the GraphSAGE-on-Cora reproducibility experiment. Trains the
// same model with the same seed many times per device and determinism level and prints, per
// level, how many distinct weight sets came out, the accuracy spread, the largest weight
// difference from run 1 and the time per run; optionally the spread K seeds cause, a JSON file
// and a self-contained HTML report.
#include "commands.hpp"
#include "samebits/app/experiment.hpp"
#include "samebits/app/report.hpp"
#include "samebits/samebits.hpp"
#include "samebits/trace.hpp"
#include "samebits/util/json_text.hpp"

#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <unistd.h>

namespace samebits::cli {

namespace {

struct ExperimentCli {
  nn::ExperimentConfig cfg;
  std::string devices = "auto";
  std::string levels = "not_guaranteed,run_to_run,portable";
  std::string check = "cora";
  int threads = 0;
  std::string json_path, report_path, trace_path;
};

// Progress: a redrawn bar on a terminal, one line per finished group otherwise (logs, CI).
class ProgressPrinter {
public:
  ProgressPrinter() : tty_(::isatty(::fileno(stderr)) != 0) {}
  void operator()(const nn::Progress& p) {
    const auto& g = *p.group;
    const std::string label = fmt::format("{} {}{}", to_string(g.device), to_string(g.level),
                                          g.kind == "seeds" ? " (seeds)" : "");
    if (p.done == 1)
      start_ = std::chrono::steady_clock::now();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (tty_) {
      const int width = 30;
      const int fill = static_cast<int>(static_cast<double>(width) * p.done / p.total);
      fmt::print(stderr, "\r  {:<28} [{}{}] {:>5}/{:<5} {:6.1f} s", label, std::string(fill, '#'),
                 std::string(width - fill, '.'), p.done, p.total, secs);
      if (p.done == p.total)
        fmt::print(stderr, "\n");
      std::fflush(stderr);
    } else if (p.done == p.total) {
      fmt::print(stderr, "  {}: {} runs, {} distinct weight sets, {:.1f} s\n", label, p.total,
                 g.distinct(), secs);
    }
  }

private:
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

void run(ExperimentCli& o) {
  if (o.threads > 0)
    set_num_threads(o.threads);
  auto& c = o.cfg;
  c.devices = device_list(o.devices);
  c.levels = parse_level_list(o.levels, /*all_allowed=*/false);
  if (o.check != "cora" && o.check != "none")
    throw InvalidArgument("experiment: --check must be 'cora' or 'none'");
  c.check_cora = o.check == "cora";

  detail::check_writable(o.json_path, "experiment --json");
  if (!o.report_path.empty())
    nn::check_report_path(o.report_path);
  ProgressPrinter progress;
  std::optional<trace::Session> tracing;
  if (!o.trace_path.empty())
    tracing.emplace(o.trace_path);
  const nn::ExperimentResult r = nn::run_experiment(c, [&](const nn::Progress& p) { progress(p); });
  if (tracing)
    trace::stop(); // a trace that cannot be completed throws here, not in a destructor
  tracing.reset();
  fmt::print("{}", nn::format_table(r));
  const nlohmann::json j = nn::to_json(r);
  if (!o.json_path.empty()) {
    detail::write_whole_file(o.json_path, detail::json_text(j, 1) + "\n", "experiment --json");
    fmt::print("results: {}\n", o.json_path);
  }
  if (!o.report_path.empty()) {
    nn::write_report(o.report_path, j);
    fmt::print("report: {}\n", o.report_path);
  }
}

} // namespace

void add_experiment_command(CLI::App& app) {
  auto* exp = app.add_subcommand("experiment", "Reproducibility experiments");
  exp->require_subcommand(1);
  auto o = std::make_shared<ExperimentCli>();
  auto& c = o->cfg;
  auto* g = exp->add_subcommand(
      "graphsage", "Train a 2-layer GraphSAGE on Cora many times per device and determinism "
                   "level; count distinct weight sets");
  g->add_option("--data", c.data, "Data set directory (nodes.tsv, edges.tsv)")
      ->capture_default_str();
  g->add_option("--check", o->check, "Check the data set's counts: cora or none")
      ->capture_default_str();
  g->add_option("--runs", c.runs, "Trainings per device and level")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  g->add_option("--epochs", c.epochs, "Epochs per training")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  g->add_option("--device", o->devices,
                "cpu, cuda, or a list (cpu,cuda); auto: cpu plus cuda if present")
      ->check(device_names(true))
      ->capture_default_str();
  g->add_option("--levels", o->levels, "Determinism levels, comma-separated")
      ->check(level_list(false))
      ->capture_default_str();
  g->add_option("--seeds", c.seeds, "Also train K different seeds once each (the seed spread)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  g->add_option("--seed", c.seed, "Seed of the repeated runs (first seed of --seeds)")
      ->check(seed_value())
      ->capture_default_str();
  g->add_option("--threads", o->threads,
                "CPU threads (default: SAMEBITS_NUM_THREADS, else every core)")
      ->check(CLI::Range(1, 1024));
  g->add_option("--track-runs", c.track_runs, "Runs compared with run 1 after every epoch")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  g->add_option("--hidden", c.model.hidden, "Hidden width")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  g->add_option("--dropout", c.model.dropout, "Dropout probability")
      ->check(CLI::Range(0.0, 0.999))
      ->capture_default_str();
  g->add_option("--lr", c.model.lr, "Adam learning rate")
      ->check(finite_at_least(0.0))
      ->capture_default_str();
  g->add_option("--weight-decay", c.model.weight_decay, "L2 weight decay (added to the gradient)")
      ->check(finite_at_least(0.0))
      ->capture_default_str();
  g->add_option("--beta1", c.model.beta1, "Adam beta1")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  g->add_option("--beta2", c.model.beta2, "Adam beta2")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  g->add_option("--eps", c.model.eps, "Adam epsilon")
      ->check(finite_at_least(0.0))
      ->capture_default_str();
  g->add_option("--json", o->json_path, "Write all results as JSON to FILE");
  g->add_option("--report", o->report_path, "Write a self-contained HTML report to FILE.html");
  g->add_option("--trace", o->trace_path,
                "Record every op output of every run to FILE (JSON lines; compare two files with "
                "samebits diff); use with few runs");
  g->callback([o] { run(*o); });
}

} // namespace samebits::cli

// `samebits experiment graphsage`: the GraphSAGE-on-Cora reproducibility experiment. Trains the
// same model with the same seed many times per device and determinism level and prints, per
// level, how many distinct weight sets came out, the accuracy spread, the largest weight
// difference from run 1 and the time per run; optionally the spread K seeds cause, a JSON file
// and a self-contained HTML report.
#include "commands.hpp"
#include "samebits/app/experiment.hpp"
#include "samebits/app/model_size.hpp"
#include "samebits/app/report.hpp"
#include "samebits/errors.hpp"
#include "samebits/samebits.hpp"
#include "samebits/trace.hpp"
#include "samebits/util/json_text.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <signal.h>
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

// Progress: a redrawn bar on a terminal; otherwise (logs, CI) a line every 10 s and one per
// finished group, so that a long run is never silent for long.
class ProgressPrinter {
public:
  ProgressPrinter() : tty_(::isatty(::fileno(stderr)) != 0) {}
  void begin() { start_ = last_line_ = Clock::now(); }
  void operator()(const nn::Progress& p) {
    const auto& g = *p.group;
    const std::string label = fmt::format("{} {}{}", to_string(g.device), to_string(g.level),
                                          g.kind == "seeds" ? " (seeds)" : "");
    const auto now = Clock::now();
    const double secs = std::chrono::duration<double>(now - start_).count();
    if (tty_) {
      const int width = 30;
      const int fill = static_cast<int>(static_cast<double>(width) * p.done / p.total);
      fmt::print(stderr, "\r  {:<28} [{}{}] {:>5}/{:<5} {:6.1f} s", label, std::string(fill, '#'),
                 std::string(width - fill, '.'), p.done, p.total, secs);
      if (p.done == p.total)
        fmt::print(stderr, "\n");
      std::fflush(stderr);
    } else if (p.done == p.total) {
      fmt::print(stderr, "  {}: {} runs, {} distinct weight set{}, {:.1f} s\n", label, p.total,
                 g.distinct(), g.distinct() == 1 ? "" : "s", secs);
      last_line_ = now;
    } else if (now - last_line_ >= std::chrono::seconds(10)) {
      fmt::print(stderr, "  {}: {} of {} runs, {:.1f} s\n", label, p.done, p.total, secs);
      last_line_ = now;
    }
    if (p.done == p.total)
      start_ = now;
  }

private:
  using Clock = std::chrono::steady_clock;
  bool tty_;
  Clock::time_point start_ = Clock::now(), last_line_ = start_;
};

// SIGINT and SIGTERM end the experiment at the next run boundary (run_experiment's should_stop);
// the handler is reset by its first signal, so a second one ends the process at once.
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_signal(int sig) {
  g_signal = sig;
  static const char text[] = "\nsamebits: interrupted: stopping after the current run (again to "
                             "quit at once)\n";
  (void)!::write(2, text, sizeof text - 1);
}

// A signal the process was started with ignored (a background job of a shell without job control,
// nohup) stays ignored, as the shell meant.
class InterruptHandlers {
public:
  InterruptHandlers() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, nullptr, &old_int_);
    sigaction(SIGTERM, nullptr, &old_term_);
    if (old_int_.sa_handler != SIG_IGN)
      sigaction(SIGINT, &sa, nullptr);
    if (old_term_.sa_handler != SIG_IGN)
      sigaction(SIGTERM, &sa, nullptr);
  }
  ~InterruptHandlers() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;

private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// Loads the data set and says, before anything is built, what it holds and what the model will
// take; refuses a model that cannot fit in memory.
nn::Dataset load_and_check(nn::ExperimentConfig& c) {
  std::filesystem::path dir;
  nn::Dataset data = nn::load_experiment_data(c, &dir);
  c.data = dir;
  if (data.duplicate_edges > 0)
    fmt::print(stderr,
               "warning: {} edge{} listed more than once (first: {}); each copy counts as one "
               "more neighbour in the mean: remove them if they are not meant\n",
               data.duplicate_edges, data.duplicate_edges == 1 ? " is" : "s are",
               data.first_duplicate);
  for (Device d : c.devices) {
    nn::SageConfig mc = c.model;
    mc.device = d;
    // The experiment keeps run 1's weights after every epoch, and two more copies, in float64.
    const nn::ModelSize size = nn::model_size(data, mc, c.track_runs > 0 ? c.epochs + 3 : 2);
    if (d == c.devices.front()) {
      for (const std::string& w : nn::size_warnings(size))
        fmt::print(stderr, "warning: {}\n", w);
    }
    fmt::print("{}{}\n", nn::describe(size),
               c.devices.size() > 1 ? fmt::format(" ({})", to_string(d)) : "");
    nn::check_fits(size);
  }
  std::fflush(stdout);
  return data;
}

void run(ExperimentCli& o) {
  if (o.threads > 0)
    set_num_threads(o.threads);
  auto& c = o.cfg;
  c.devices = device_list(o.devices);
  c.levels = parse_level_list(o.levels, /*all_allowed=*/true);
  c.check_cora = o.check == "cora";

  const nn::Dataset data = load_and_check(c);
  ProgressPrinter progress;
  std::optional<trace::Session> tracing;
  if (!o.trace_path.empty())
    tracing.emplace(o.trace_path);
  const InterruptHandlers handlers;
  progress.begin();
  nn::ExperimentResult r = nn::run_experiment(
      c, data, [&](const nn::Progress& p) { progress(p); }, [] { return g_signal != 0; });
  r.command = command_line();
  if (tracing)
    trace::stop(); // a trace that cannot be completed throws here, not in a destructor
  tracing.reset();
  fmt::print("{}", nn::format_table(r));
  const nlohmann::json j = nn::to_json(r);
  // Each file is attempted even when the other fails: a full disk under one must not lose both.
  std::optional<Error> failed;
  try {
    if (!o.json_path.empty()) {
      detail::write_whole_file(o.json_path, detail::json_text(j, 1) + "\n", "experiment --json");
      fmt::print("results: {}\n", o.json_path);
    }
  } catch (const Error& e) {
    failed = e;
  }
  try {
    if (!o.report_path.empty()) {
      nn::write_report(o.report_path, j);
      fmt::print("report: {}\n", o.report_path);
    }
  } catch (const Error& e) {
    if (failed)
      fmt::print(stderr, "samebits: error: {}\n", e.what());
    else
      failed = e;
  }
  if (failed)
    throw *failed;
  if (g_signal != 0) {
    std::fflush(stdout);
    fmt::print(stderr, "samebits: interrupted by {}: {} complete group{} kept{}\n",
               g_signal == SIGINT ? "SIGINT" : "SIGTERM", r.groups.size(),
               r.groups.size() == 1 ? "" : "s",
               !r.complete ? fmt::format(" ({} left out)", r.interrupted) : "");
    throw CLI::RuntimeError(128 + g_signal); // 130 for SIGINT, 143 for SIGTERM, as shells say
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
  g->add_option("--data", c.data,
                "Data set directory (nodes.tsv, edges.tsv; default: the bundled Cora, found "
                "beside the program)");
  g->add_option("--check", o->check, "Check the data set's counts: cora or none")
      ->check(CLI::IsMember({"cora", "none"}))
      ->capture_default_str();
  g->add_option("--runs", c.runs, "Trainings per device and level")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  g->add_option("--epochs", c.epochs, "Epochs per training")
      ->check(integer_in(1, 100000))
      ->capture_default_str();
  g->add_option("--device", o->devices,
                "cpu, cuda, or a list (cpu,cuda); auto: cpu plus cuda if present")
      ->check(device_names(true))
      ->capture_default_str();
  g->add_option("--levels", o->levels, "Determinism levels, comma-separated, or all")
      ->check(level_list(true))
      ->capture_default_str();
  g->add_option("--seeds", c.seeds, "Also train K different seeds once each (the seed spread)")
      ->check(integer_in(0, 1000000))
      ->capture_default_str();
  g->add_option("--seed", c.seed, "Seed of the repeated runs (first seed of --seeds)")
      ->check(seed_value())
      ->capture_default_str();
  g->add_option("--threads", o->threads,
                "CPU threads (default: SAMEBITS_NUM_THREADS, else every core)")
      ->check(integer_in(1, 1024));
  g->add_option("--race-threads", c.race_threads,
                "CPU threads of the CPU's not_guaranteed groups (0: 2 per core, at least 16, so "
                "that its atomics race; -1: as --threads)")
      ->check(integer_in(-1, 1024))
      ->capture_default_str();
  g->add_option("--track-runs", c.track_runs, "Runs compared with run 1 after every epoch")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  g->add_option("--hidden", c.model.hidden, "Hidden width")
      ->check(integer_in(1, 1 << 20))
      ->capture_default_str();
  g->add_option("--dropout", c.model.dropout, "Dropout probability")
      ->check(number_in(0.0, 0.999))
      ->capture_default_str();
  g->add_option("--lr", c.model.lr, "Adam learning rate")
      ->check(finite_at_least(0.0))
      ->capture_default_str();
  g->add_option("--weight-decay", c.model.weight_decay, "L2 weight decay (added to the gradient)")
      ->check(finite_at_least(0.0))
      ->capture_default_str();
  g->add_option("--beta1", c.model.beta1, "Adam beta1")
      ->check(number_in(0.0, 0.999999))
      ->capture_default_str();
  g->add_option("--beta2", c.model.beta2, "Adam beta2")
      ->check(number_in(0.0, 0.999999))
      ->capture_default_str();
  g->add_option("--eps", c.model.eps, "Adam epsilon")
      ->check(finite_at_least(0.0))
      ->capture_default_str();
  g->add_option("--json", o->json_path, "Write all results as JSON to FILE (- : standard output)")
      ->check(output_file());
  g->add_option("--report", o->report_path, "Write a self-contained HTML report to FILE.html")
      ->check(output_file());
  g->add_option("--trace", o->trace_path,
                "Record every op output of every run to FILE (JSON lines; compare two files with "
                "samebits diff); use with few runs")
      ->check(output_file());
  g->callback([o] { run(*o); });
}

} // namespace samebits::cli

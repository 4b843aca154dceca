// `samebits calibrate --op OP [shape options] --runs N --level L --device D --safety S --out FILE`:
// runs an op N times on the same inputs and writes tolerances (max absolute and relative spread
// times the safety factor) for its output to a JSON file that tests load with load_tolerances()
// and check with expect_close() (extras/gtest/samebits/tolerance_gtest.hpp).
// `samebits calibrate --experiment graphsage [--data DIR] [--epochs E] ...` does the same for the
// GraphSAGE experiment: N trainings with one seed, tolerances for its parameters and outputs.
#include "commands.hpp"
#include "samebits/app/cora.hpp"
#include "samebits/app/graphsage.hpp"
#include "samebits/app/variability.hpp"
#include "samebits/samebits.hpp"
#include "samebits/tolerance.hpp"

#include <fmt/format.h>

namespace samebits::cli {

namespace {

struct CalibrateCli {
  std::string experiment, data = "data/cora";
  int epochs = 10;
  std::string op, level = "not_guaranteed", device = "cpu", out = "tolerances.json";
  OpShape shape;
  int runs = 20;
  double safety = 4.0;
  std::uint64_t seed = 1;
};

void print_tolerance(const Tolerances& t, const std::string& name, double safety) {
  const Tolerance& tol = t.at(name);
  fmt::print("  {:<22} measured max abs {:.3g}, max rel {:.3g}; tolerance (x{}) abs {:.3g}, rel "
             "{:.3g}{}\n",
             name, tol.max_abs_diff, tol.max_rel_diff, safety, tol.abs, tol.rel,
             tol.abs == 0 && tol.rel == 0 ? " (no spread: must match exactly)" : "");
}

// At not_guaranteed, no spread in this calibration does not mean none elsewhere: the order of its
// atomics depends on the thread count and on timing. Says so under a tolerance that demands exact
// equality.
void warn_if_exact_at_not_guaranteed(const Tolerances& t, Determinism level) {
  if (level != Determinism::not_guaranteed)
    return;
  for (const auto& [name, tol] : t.tensors)
    if (tol.abs == 0 && tol.rel == 0) {
      fmt::print("note: {} showed no spread, but not_guaranteed results can vary with the thread "
                 "count ({} here), timing and the GPU; a test using this file may fail elsewhere. "
                 "Calibrate with more runs or threads, or test at run_to_run.\n",
                 name, num_threads());
      return;
    }
}

// N trainings of the GraphSAGE experiment with one seed: tolerances for the trained parameters
// and for the output log-probabilities.
void run_experiment(const CalibrateCli& c, Device device, Determinism level) {
  if (c.experiment != "graphsage")
    throw InvalidArgument("unknown experiment '" + c.experiment +
                          "': the one there is is graphsage");
  const nn::Dataset data = nn::load_dataset(c.data);
  nn::SageConfig cfg;
  cfg.level = level;
  cfg.device = device;
  nn::GraphSage model(data, cfg);
  Calibrator cal(c.safety);
  for (int r = 0; r < c.runs; ++r) {
    model.init(c.seed);
    for (int e = 0; e < c.epochs; ++e)
      model.train_epoch();
    model.infer();
    cal.add("graphsage.parameters", model.parameters());
    cal.add("graphsage.log_probs", model.log_probs());
  }
  const std::string source = fmt::format("graphsage on {}: {} epochs on {} at {}, seed {}", c.data,
                                         c.epochs, c.device, c.level, c.seed);
  const Tolerances t = cal.tolerances(source);
  save_tolerances(t, c.out);
  fmt::print("calibrated over {} trainings ({})\n", c.runs, source);
  print_tolerance(t, "graphsage.parameters", c.safety);
  print_tolerance(t, "graphsage.log_probs", c.safety);
  warn_if_exact_at_not_guaranteed(t, level);
  fmt::print("written to {}\n", c.out);
}

void run(const CalibrateCli& c) {
  detail::check_writable(c.out, "calibrate --out");
  const Device device = parse_device(c.device);
  const Determinism level = parse_determinism(c.level);
  set_mode({level, false}); // so that the embedded environment states the level
  if (!c.experiment.empty())
    return run_experiment(c, device, level);
  if (c.op.empty())
    throw InvalidArgument("calibrate: give --op OP or --experiment graphsage");
  PreparedOp p = prepare_op(c.op, c.shape, device, c.seed);
  Calibrator cal(c.safety);
  const std::string name = p.op + ".out";
  for (int r = 0; r < c.runs; ++r) {
    p.run({.level = level});
    cal.add(name, p.output);
  }
  const std::string source =
      fmt::format("{}: {} on {} at {}, seed {}", p.op, p.description, c.device, c.level, c.seed);
  const Tolerances t = cal.tolerances(source);
  save_tolerances(t, c.out);
  const Tolerance& tol = t.at(name);
  fmt::print("calibrated {} over {} runs ({})\n", name, c.runs, source);
  fmt::print("  measured spread    max abs {:.3g}, max rel {:.3g}\n", tol.max_abs_diff,
             tol.max_rel_diff);
  fmt::print("  tolerance (x{})    abs {:.3g}, rel {:.3g}{}\n", c.safety, tol.abs, tol.rel,
             tol.abs == 0 && tol.rel == 0 ? "  (no spread: results must match exactly)" : "");
  warn_if_exact_at_not_guaranteed(t, level);
  fmt::print("written to {}\n", c.out);
}

} // namespace

void add_calibrate_command(CLI::App& app) {
  auto c = std::make_shared<CalibrateCli>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Measure an op's run-to-run spread and write tolerances for tests (JSON)");
  auto* op = cmd->add_option("--op", c->op, "Op to run (see samebits variability --list)")
                 ->check(known_op());
  auto* exp = cmd->add_option("--experiment", c->experiment,
                              "Calibrate an experiment instead of an op: graphsage");
  op->excludes(exp);
  cmd->add_option("--data", c->data, "graphsage: data set directory")
      ->needs(exp)
      ->capture_default_str();
  cmd->add_option("--epochs", c->epochs, "graphsage: epochs per training")
      ->check(CLI::Range(1, 100000))
      ->needs(exp)
      ->capture_default_str();
  for (CLI::Option* shape_option : add_shape_options(*cmd, c->shape, c->op))
    shape_option->excludes(exp);
  cmd->add_option("--runs", c->runs, "Runs (trainings for --experiment)")
      ->check(CLI::Range(2, 1000000))
      ->capture_default_str();
  cmd->add_option("--level", c->level, "not_guaranteed, run_to_run or portable")
      ->check(one_level())
      ->capture_default_str();
  cmd->add_option("--device", c->device, "cpu, cuda or cuda:N")
      ->check(device_names(false))
      ->capture_default_str();
  cmd->add_option("--seed", c->seed, "Seed of the inputs")
      ->check(seed_value())
      ->capture_default_str();
  cmd->add_option("--safety", c->safety, "Safety factor applied to the measured spread")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--out", c->out, "Tolerance file to write")->capture_default_str();
  cmd->callback([c] { run(*c); });
}

} // namespace samebits::cli

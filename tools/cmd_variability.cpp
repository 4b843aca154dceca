// `samebits variability --op OP [shape options] --runs N --level L --device D [--json FILE]`:
// runs an op N times on the same inputs and reports the run-to-run variability metrics of
// arXiv:2408.05148 (see include/samebits/app/variability.hpp).
#include "commands.hpp"
#include "samebits/app/variability.hpp"
#include "samebits/samebits.hpp"

#include <fmt/format.h>
#include <string>

namespace samebits::cli {

namespace {

struct VariabilityCli {
  std::string op, levels = "not_guaranteed", device = "cpu", reference = "first", json;
  OpShape shape;
  VariabilityOptions options;
  bool list = false;
};

void run(const VariabilityCli& c) {
  if (c.list || c.op.empty()) {
    fmt::print("ops, with the shape options each reads and their defaults (--features -1: 1-d "
               "tensors):\n");
    for (const auto& e : variability_ops()) {
      std::string reads;
      for (const auto& [bit, flag] : kShapeFlags)
        if (e.reads & bit)
          reads +=
              fmt::format("{}{} {}", reads.empty() ? "" : " ", flag, shape_value(e.defaults, bit));
      fmt::print("  {:<15} {} [{}]\n", e.name, e.help, reads);
    }
    return;
  }
  detail::check_writable(c.json, "variability --json");
  VariabilityOptions o = c.options;
  o.device = parse_device(c.device);
  o.reference_deterministic = c.reference == "portable";
  std::string json = "[\n";
  bool first = true;
  for (Determinism level : parse_level_list(c.levels, /*all_allowed=*/true)) {
    o.level = level;
    set_mode({level, false}); // so that the embedded environment states the level
    const auto r = measure_variability(c.op, c.shape, o);
    fmt::print("{}", format_report(r));
    json += (first ? "" : ",\n") + to_json(r);
    first = false;
  }
  if (!c.json.empty()) {
    detail::write_whole_file(c.json, json + "\n]\n", "variability --json");
    fmt::print("report written to {}\n", c.json);
  }
}

} // namespace

void add_variability_command(CLI::App& app) {
  auto c = std::make_shared<VariabilityCli>();
  auto* cmd = app.add_subcommand(
      "variability", "Run an op N times on the same inputs and measure how much the output varies");
  cmd->add_option("--op", c->op, "Op to run (--list shows them)")->check(known_op());
  cmd->add_flag("--list", c->list, "List the ops and their default shapes");
  add_shape_options(*cmd, c->shape, c->op);
  cmd->add_option("--runs", c->options.runs, "Runs")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--level", c->levels,
                  "not_guaranteed, run_to_run, portable, a comma list, or all")
      ->check(level_list(true))
      ->capture_default_str();
  cmd->add_option("--device", c->device, "cpu, cuda or cuda:N")
      ->check(device_names(false))
      ->capture_default_str();
  cmd->add_option("--seed", c->options.seed, "Seed of the inputs")
      ->check(seed_value())
      ->capture_default_str();
  cmd->add_option("--reference", c->reference,
                  "Compare with the first run, or with a portable run (as the paper does)")
      ->check(CLI::IsMember({"first", "portable"}))
      ->capture_default_str();
  cmd->add_option("--guard", c->options.guard,
                  "Floor of the relative-difference denominator (0, the default: smallest normal)")
      ->check(finite_at_least(0.0));
  cmd->add_option("--json", c->json, "Also write the reports (with the environment) to FILE");
  cmd->callback([c] { run(*c); });
}

} // namespace samebits::cli

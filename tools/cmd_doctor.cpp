// `samebits doctor`: the environment report (build, CPU floating-point state, GPUs, versions,
// result-affecting variables, determinism level and what it promises).
#include "commands.hpp"
#include "samebits/environment.hpp"
#include "samebits/samebits.hpp"

#include <fmt/format.h>

namespace samebits::cli {

void add_doctor_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto level = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("doctor", "Print what decides whether results reproduce here: "
                                           "build, flags, CPU/GPU, versions, variables, level");
  cmd->add_flag("--json", *json, "Print the report as one JSON object");
  cmd->add_option("--level", *level, "Report for this determinism level instead of the default")
      ->check(CLI::IsMember({"not_guaranteed", "run_to_run", "portable"}));
  cmd->callback([json, level] {
    if (!level->empty())
      set_mode({parse_determinism(*level), mode().warn_only});
    fmt::print("{}\n", *json ? environment_json() : environment_text());
  });
}

} // namespace samebits::cli

// samebits: the command-line program. Subcommands live in tools/cmd_*.cpp.
#include "commands.hpp"
#include "samebits/samebits.hpp"
#include "samebits/util/num_threads_env.hpp"

#include <cstdio>
#include <exception>
#include <fmt/format.h>
#include <iostream>
#include <new>
#include <string>

namespace {

// `samebits frobnicate`, `samebits experiment frobnicate`: CLI11 says only that a subcommand is
// required. Names the word given and the subcommands there are; empty when no word was given.
std::string unknown_subcommand(CLI::App& app) {
  CLI::App* at = &app;
  while (!at->get_subcommands().empty())
    at = at->get_subcommands().front();
  const auto left = at->remaining();
  if (at->get_require_subcommand_min() == 0 || left.empty() || left.front().starts_with('-'))
    return "";
  std::string command, names;
  for (CLI::App* p = at; p->get_parent() != nullptr; p = p->get_parent())
    command = " " + p->get_name() + command;
  command = "samebits" + command;
  for (const CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; }))
    if (!sub->get_name().empty()) // option groups are nameless subcommands
      names += (names.empty() ? "" : ", ") + sub->get_name();
  return fmt::format("unknown subcommand '{}' ({} has {}; `{} --help` says what each does)",
                     left.front(), command, names, command);
}

// Whether a --threads option was given anywhere on the command line (the top level or a
// subcommand's): it overrides SAMEBITS_NUM_THREADS, so a malformed variable does not matter then.
bool threads_option_given(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    if (const CLI::Option* o = sub->get_option_no_throw("--threads");
        o != nullptr && o->count() > 0)
      return true;
    if (threads_option_given(*sub))
      return true;
  }
  return false;
}

// Exit status of a parse that stopped: 0 for --help and --version, a subcommand's own status
// (diff: 1 when the traces differ, 2 when one cannot be read), and 2 for every usage error (an
// unknown subcommand or option, a value that is missing or out of range), as POSIX tools do.
int parse_exit_status(CLI::App& app, const CLI::ParseError& e) {
  const int status = app.exit(e);
  if (status == 0 || dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr)
    return status;
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"samebits: bitwise-reproducible numerical ops on CPUs and CUDA GPUs"};
  app.set_version_flag("--version", std::string(samebits::version()) + " (" +
                                        std::string(samebits::git_revision()) + ")");
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads,
                 "CPU threads for ops (default: SAMEBITS_NUM_THREADS, else every core)")
      ->check(CLI::Range(1, 1024));
  app.parse_complete_callback([&] {
    if (threads > 0) {
      samebits::set_num_threads(threads); // overrides SAMEBITS_NUM_THREADS
      return;
    }
    // A malformed SAMEBITS_NUM_THREADS is refused before any work, as a usage error, also by
    // commands that never start the CPU pool (diff, a run on CUDA alone); doctor reports it.
    if (app.got_subcommand("doctor") || threads_option_given(app))
      return;
    try {
      samebits::detail::num_threads_from_environment();
    } catch (const samebits::InvalidArgument& e) {
      std::cerr << "samebits: error: " << e.what() << '\n';
      throw CLI::RuntimeError(2);
    }
  });
  samebits::cli::add_ops_command(app);
  samebits::cli::add_demo_command(app);
  samebits::cli::add_doctor_command(app);
  samebits::cli::add_diff_command(app);
  samebits::cli::add_variability_command(app);
  samebits::cli::add_calibrate_command(app);
  samebits::cli::add_experiment_command(app);
  samebits::cli::add_bench_graphsage_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    // CLI11 reports an unknown subcommand as a missing one.
    const std::string unknown = unknown_subcommand(app);
    if (unknown.empty())
      return parse_exit_status(app, e);
    std::cerr << "samebits: error: " << unknown << '\n';
    return 2;
  } catch (const CLI::ParseError& e) {
    return parse_exit_status(app, e);
  } catch (const samebits::Error& e) {
    std::cerr << "samebits: error: " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "samebits: error: out of host memory (the sizes asked for do not fit in this "
                 "machine's memory)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "samebits: error: " << e.what() << '\n';
    return 1;
  }
  // Output that could not be written (a full disk, a closed pipe) is a failure, not a success.
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "samebits: error: writing the output failed\n";
    return 1;
  }
  return 0;
}

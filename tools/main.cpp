// samebits: the command-line program. Subcommands live in tools/cmd_*.cpp.
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "commands.hpp"
#include "samebits/samebits.hpp"

int main(int argc, char** argv) {
  CLI::App app{"samebits: bitwise-reproducible numerical ops on CPUs and CUDA GPUs"};
  app.set_version_flag("--version", std::string(samebits::version()) + " (" +
                                        std::string(samebits::git_revision()) + ")");
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads for ops (default: all cores)")
      ->check(CLI::Range(1, 1024));
  app.parse_complete_callback([&] {
    if (threads > 0) samebits::set_num_threads(threads);
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
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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

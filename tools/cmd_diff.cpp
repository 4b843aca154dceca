// `samebits diff A B [--plot FILE.svg]`: where two traces (written with --trace / trace::start)
// first differ, how far apart they are there, and how the difference grows afterwards.
// Exit status, as with diff(1): 0 when the traces agree, 1 when they differ (a trace that stops
// early counts as differing), 2 when a trace cannot be read or the chart cannot be written.
#include "commands.hpp"
#include "samebits/app/trace_diff.hpp"
#include "samebits/errors.hpp"

#include <fmt/format.h>

namespace samebits::cli {

namespace {
struct DiffOptions {
  std::string a, b, plot;
};
} // namespace

void add_diff_command(CLI::App& app) {
  auto o = std::make_shared<DiffOptions>();
  auto* cmd = app.add_subcommand(
      "diff", "Compare two traces: first differing op, distance there, growth afterwards "
              "(exit status 1 when they differ)");
  cmd->add_option("A", o->a, "First trace (JSON lines)")->required()->check(CLI::ExistingFile);
  cmd->add_option("B", o->b, "Second trace")->required()->check(CLI::ExistingFile);
  cmd->add_option("--plot", o->plot, "Also write an SVG chart of the distance per entry");
  cmd->callback([o] {
    trace::DiffReport report;
    try {
      detail::check_writable(o->plot, "diff --plot");
      report = trace::diff(trace::read(o->a), trace::read(o->b));
      fmt::print("A: {}\nB: {}\n{}", o->a, o->b, trace::format_diff(report));
      if (!o->plot.empty()) {
        detail::write_whole_file(o->plot, trace::diff_svg(report), "diff --plot");
        fmt::print("chart written to {}\n", o->plot);
      }
    } catch (const Error& e) {
      fmt::print(stderr, "samebits: error: {}\n", e.what());
      throw CLI::RuntimeError(2);
    }
    if (!report.agree())
      throw CLI::RuntimeError(1);
  });
}

} // namespace samebits::cli

// Checks of option values, and options, shared by the subcommands.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <exception>
#include <map>
#include <string>

#include "commands.hpp"
#include "samebits/determinism.hpp"
#include "samebits/errors.hpp"
#include "samebits/variability.hpp"

namespace samebits::cli {

CLI::Validator finite_at_least(double lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        double v = 0;
        try {
          std::size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size()) return "'" + text + "' is not a number";
        } catch (const std::exception&) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(v) || v < lo) return fmt::format("{} is not a finite number >= {}", text, lo);
        return "";
      },
      fmt::format("FINITE >= {}", lo));
}

CLI::Validator integer_at_least(std::int64_t lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || v < lo)
          return fmt::format("'{}' is not a whole number >= {}", text, lo);
        return "";
      },
      fmt::format("INT >= {}", lo));
}

CLI::Validator level_list(bool all_allowed) {
  return CLI::Validator(
      [all_allowed](std::string& text) -> std::string {
        if (all_allowed && text == "all") return "";
        std::map<Determinism, std::string> seen;  // level -> the name it was given as
        std::size_t b = 0;
        while (b <= text.size()) {
          const auto e = text.find(',', b);
          const std::string item = text.substr(b, e == std::string::npos ? e : e - b);
          if (!item.empty()) {
            Determinism level{};
            try {
              level = parse_determinism(item);
            } catch (const InvalidArgument& ex) {
              return ex.what();
            }
            const auto [at, first] = seen.emplace(level, item);
            if (!first)
              return fmt::format("the level {} is listed twice{}: give each level once",
                                 to_string(level),
                                 at->second == item
                                     ? ""
                                     : fmt::format(" (as '{}' and as '{}')", at->second, item));
          }
          if (e == std::string::npos) break;
          b = e + 1;
        }
        return "";
      },
      all_allowed ? "LEVEL,... or all" : "LEVEL,...");
}

void add_shape_options(CLI::App& cmd, OpShape& shape) {
  // 0, what an option not given holds, stands for the op's own size (OpShape): an op on nothing
  // would have nothing to measure.
  const std::string op_default = "0 or not given: the op's, listed by samebits variability --list";
  cmd.add_option("--n", shape.n, "Elements / sources / edges (" + op_default + ")")
      ->check(integer_at_least(0));
  cmd.add_option("--rows", shape.rows,
                 "Output rows / targets / segments / nodes (" + op_default + ")")
      ->check(integer_at_least(0));
  cmd.add_option("--features", shape.features,
                 "Features per row (-1: 1-d tensors; " + op_default + ")")
      ->check(integer_at_least(-1));
  cmd.add_option("--dim", shape.dim, "sum_dim: reduced dimension");
  cmd.add_option("--reduce", shape.reduce,
                 "sum, mean, amax or amin (scatter_reduce, segment_reduce, aggregate)");
}

}  // namespace samebits::cli

// Checks of option values shared by the subcommands.
#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <string>

#include "commands.hpp"

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

}  // namespace samebits::cli

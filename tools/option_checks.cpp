// Checks of option values, and options, shared by the subcommands.
#include "commands.hpp"
#include "samebits/app/variability.hpp"
#include "samebits/determinism.hpp"
#include "samebits/errors.hpp"
#include "samebits/samebits.hpp"
#include "samebits/util/excerpt.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <optional>
#include <string>

namespace samebits::cli {

CLI::Validator finite_at_least(double lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        double v = 0;
        try {
          std::size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size())
            return "'" + text + "' is not a number";
        } catch (const std::exception&) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(v) || v < lo)
          return fmt::format("{} is not a finite number >= {}", text, lo);
        return "";
      },
      fmt::format("FINITE >= {}", lo));
}

namespace {
// `text` as a whole number of type T: nothing when it is not one (a sign an unsigned T cannot
// take, other characters, a value out of T's range).
template <class T> std::optional<T> whole_number(const std::string& text) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return v;
}
// CLI11 would read a leading 0 as octal (010 is 8): such numbers are refused with this message.
std::string leading_zero_problem(const std::string& text) {
  if (text.size() > 1 && text[0] == '0')
    return fmt::format("'{}': write the number without leading zeros", text);
  return "";
}
} // namespace

CLI::Validator integer_at_least(std::int64_t lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        const auto v = whole_number<std::int64_t>(text);
        if (!v || *v < lo)
          return fmt::format("'{}' is not a whole number >= {}", text, lo);
        return leading_zero_problem(text);
      },
      fmt::format("INT >= {}", lo));
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!whole_number<std::uint64_t>(text))
          return fmt::format("'{}' is not a seed: give a whole number from 0 to 2^64 - 1", text);
        return leading_zero_problem(text);
      },
      "SEED");
}

std::vector<std::string> comma_items(const std::string& text, const char* what) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (;;) {
    const auto e = text.find(',', b);
    out.push_back(text.substr(b, e == std::string::npos ? e : e - b));
    if (out.back().empty())
      throw InvalidArgument(fmt::format("an empty {} in '{}': give {}s separated by single commas",
                                        what, text, what));
    if (e == std::string::npos)
      return out;
    b = e + 1;
  }
}

std::vector<Device> device_list(const std::string& text) {
  std::vector<Device> devices;
  const std::vector<std::string> items = comma_items(text, "device");
  const bool has_auto = std::find(items.begin(), items.end(), "auto") != items.end();
  auto add = [&](Device d) {
    if (std::find(devices.begin(), devices.end(), d) != devices.end())
      throw InvalidArgument(
          fmt::format("the device {} is listed twice{}: give each device once", to_string(d),
                      has_auto ? " (auto stands for cpu and, where present, cuda:0)" : ""));
    devices.push_back(d);
  };
  for (const std::string& d : items) {
    if (d == "auto") {
      add(Device::cpu());
      if (cuda_available())
        add(Device::cuda());
    } else {
      add(parse_device(d));
    }
  }
  return devices;
}

void require_present(const std::vector<Device>& devices, const char* command) {
  for (Device d : devices)
    if (d.is_cuda() && !cuda_available())
      throw BackendUnavailable(fmt::format("{}: --device {}, but {}", command, to_string(d),
                                           cuda_built() ? "no CUDA device is present"
                                                        : "samebits was built without CUDA"));
}

std::vector<Determinism> parse_level_list(const std::string& text, bool all_allowed) {
  if (all_allowed && text == "all")
    return {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable};
  std::vector<Determinism> levels;
  std::map<Determinism, std::string> seen; // level -> the name it was given as
  for (const std::string& item : comma_items(text, "level")) {
    const Determinism level = parse_determinism(item);
    const auto [at, first] = seen.emplace(level, item);
    if (!first)
      throw InvalidArgument(fmt::format(
          "the level {} is listed twice{}: give each level once", to_string(level),
          at->second == item ? "" : fmt::format(" (as '{}' and as '{}')", at->second, item)));
    levels.push_back(level);
  }
  return levels;
}

namespace {
// A validator from a parser that throws InvalidArgument with the message to show.
template <class Parse> CLI::Validator refusing(Parse parse, std::string description) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          (void)parse(text);
        } catch (const InvalidArgument& e) {
          return e.what();
        }
        return "";
      },
      std::move(description));
}
} // namespace

CLI::Validator level_list(bool all_allowed) {
  return refusing([all_allowed](const std::string& t) { return parse_level_list(t, all_allowed); },
                  all_allowed ? "LEVEL,... or all" : "LEVEL,...");
}

CLI::Validator one_level() {
  return refusing([](const std::string& t) { return parse_determinism(t); }, "LEVEL");
}

CLI::Validator device_names(bool list_allowed) {
  if (list_allowed)
    return refusing([](const std::string& t) { return device_list(t); }, "DEVICE,... or auto");
  return refusing([](const std::string& t) { return parse_device(t); }, "DEVICE");
}

CLI::Validator name_list(std::vector<std::string> known, const char* what) {
  const std::string description = fmt::format("{},...", fmt::join(known, "|"));
  return refusing(
      [known = std::move(known), what](const std::string& text) {
        std::vector<std::string> seen;
        for (const std::string& item : comma_items(text, what)) {
          if (std::find(known.begin(), known.end(), item) == known.end())
            throw InvalidArgument(fmt::format("unknown {} '{}' (known: {})", what,
                                              detail::printable_excerpt(item),
                                              fmt::join(known, ", ")));
          if (std::find(seen.begin(), seen.end(), item) != seen.end())
            throw InvalidArgument(fmt::format("the {} {} is listed twice", what, item));
          seen.push_back(item);
        }
        return seen;
      },
      description);
}

CLI::Validator known_op() {
  return refusing([](const std::string& t) { return &find_op(t); }, "OP");
}

std::vector<CLI::Option*> add_shape_options(CLI::App& cmd, OpShape& shape, const std::string& op) {
  // 0, what an option not given holds, stands for the op's own size (OpShape): an op on nothing
  // would have nothing to measure.
  const std::string op_default = "0 or not given: the op's, listed by samebits variability --list";
  std::vector<CLI::Option*> options = {
      cmd.add_option("--n", shape.n, "Elements / sources / edges (" + op_default + ")")
          ->check(integer_at_least(0)),
      cmd.add_option("--rows", shape.rows,
                     "Output rows / targets / segments / nodes (" + op_default + ")")
          ->check(integer_at_least(0)),
      cmd.add_option("--features", shape.features,
                     "Features per row (-1: 1-d tensors, for the scatter and segment ops; " +
                         op_default + ")")
          ->check(integer_at_least(-1)),
      cmd.add_option("--dim", shape.dim, "sum_dim: reduced dimension"),
      cmd.add_option("--reduce", shape.reduce,
                     "sum, mean, amax or amin (scatter_reduce, segment_reduce, aggregate)")
          ->check(refusing([](const std::string& t) { return parse_reduce(t); }, "REDUCTION"))};
  cmd.parse_complete_callback([&op, &shape] {
    if (op.empty())
      return;
    try {
      check_shape(find_op(op), shape);
    } catch (const InvalidArgument& e) {
      throw CLI::ValidationError(e.what());
    }
  });
  return options;
}

} // namespace samebits::cli

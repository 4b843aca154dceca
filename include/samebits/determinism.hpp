// The determinism contract: levels, the process-wide mode, scoped guards and per-call options.
//
//   not_guaranteed < run_to_run < portable
//
// A variant declares the strongest level it guarantees; a request is met by any variant at or
// above it. Resolution order for a call: Options::level, then the innermost DeterminismGuard of
// the calling thread, then the process-wide mode.
#pragma once
#include "samebits/dtype.hpp" // Stream

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace samebits {

enum class Determinism : std::uint8_t { not_guaranteed = 0, run_to_run = 1, portable = 2 };

std::string_view to_string(Determinism d);
// Parses "not_guaranteed", "run_to_run" or "portable"; throws InvalidArgument otherwise.
Determinism parse_determinism(std::string_view s);
constexpr bool satisfies(Determinism have, Determinism want) {
  return have >= want;
}

// What the process asks for when a call does not say.
struct Mode {
  Determinism level = Determinism::run_to_run;
  // When no variant meets `level`: false throws NondeterministicError, true warns once per op
  // and runs the best variant there is.
  bool warn_only = false;
};

void set_mode(Mode m);
Mode mode(); // process-wide mode, ignoring guards
inline void set_determinism(Determinism level, bool warn_only = false) {
  set_mode({level, warn_only});
}

// Overrides the mode on this thread for its lifetime; guards nest.
class DeterminismGuard {
public:
  explicit DeterminismGuard(Determinism level, std::optional<bool> warn_only = std::nullopt);
  ~DeterminismGuard();
  DeterminismGuard(const DeterminismGuard&) = delete;
  DeterminismGuard& operator=(const DeterminismGuard&) = delete;

private:
  std::optional<Mode> previous_;
};

// Per-call options every op takes.
struct Options {
  std::optional<Determinism> level; // overrides guard and mode
  Stream stream{};
  std::string variant{}; // run this named variant (must qualify); empty: let selection choose
};

// The mode that applies to a call with these options on this thread.
Mode effective_mode(const Options& opts);

// Where warnings go (default: one line on stderr). Pass nullptr to restore the default.
void set_warning_handler(std::function<void(const std::string&)> handler);

// What the last op called on this thread ran, and why (see `samebits ops --explain`).
const std::string& last_explain();

} // namespace samebits

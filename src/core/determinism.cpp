// The process-wide determinism mode and the per-thread guard stack.
#include <atomic>
#include <string>

#include "samebits/determinism.hpp"
#include "samebits/errors.hpp"

namespace samebits {

namespace {
std::atomic<std::uint8_t> g_level{static_cast<std::uint8_t>(Determinism::run_to_run)};
std::atomic<bool> g_warn_only{false};
thread_local std::optional<Mode> t_guard;
}  // namespace

std::string_view to_string(Determinism d) {
  switch (d) {
    case Determinism::not_guaranteed: return "not_guaranteed";
    case Determinism::run_to_run: return "run_to_run";
    case Determinism::portable: return "portable";
  }
  return "?";
}

Determinism parse_determinism(std::string_view s) {
  if (s == "not_guaranteed" || s == "none") return Determinism::not_guaranteed;
  if (s == "run_to_run") return Determinism::run_to_run;
  if (s == "portable") return Determinism::portable;
  throw InvalidArgument("unknown determinism level '" + std::string(s) +
                        "': use not_guaranteed, run_to_run or portable");
}

void set_mode(Mode m) {
  g_level.store(static_cast<std::uint8_t>(m.level));
  g_warn_only.store(m.warn_only);
}

Mode mode() {
  return {static_cast<Determinism>(g_level.load()), g_warn_only.load()};
}

DeterminismGuard::DeterminismGuard(Determinism level, std::optional<bool> warn_only)
    : previous_(t_guard) {
  const Mode outer = t_guard ? *t_guard : mode();
  t_guard = Mode{level, warn_only.value_or(outer.warn_only)};
}

DeterminismGuard::~DeterminismGuard() { t_guard = previous_; }

Mode effective_mode(const Options& opts) {
  Mode m = t_guard ? *t_guard : mode();
  if (opts.level) m.level = *opts.level;
  return m;
}

}  // namespace samebits

// The process-wide determinism mode and the per-thread guard stack.
#include "samebits/determinism.hpp"

#include "samebits/errors.hpp"

#include <atomic>
#include <string>

namespace samebits {

namespace {
// The level in the low bits, warn-only in bit 7: one atomic, so that a reader never sees the level
// of one set_mode with the warn-only flag of another.
constexpr std::uint8_t kWarnOnlyBit = 0x80;
std::uint8_t packed(Mode m) {
  return static_cast<std::uint8_t>(static_cast<std::uint8_t>(m.level) |
                                   (m.warn_only ? kWarnOnlyBit : 0));
}
std::atomic<std::uint8_t> g_mode{packed({Determinism::run_to_run, false})};
thread_local std::optional<Mode> t_guard;
} // namespace

std::string_view to_string(Determinism d) {
  switch (d) {
  case Determinism::not_guaranteed:
    return "not_guaranteed";
  case Determinism::run_to_run:
    return "run_to_run";
  case Determinism::portable:
    return "portable";
  }
  return "?";
}

Determinism parse_determinism(std::string_view s) {
  if (s == "not_guaranteed" || s == "none")
    return Determinism::not_guaranteed;
  if (s == "run_to_run")
    return Determinism::run_to_run;
  if (s == "portable")
    return Determinism::portable;
  throw InvalidArgument("unknown determinism level '" + std::string(s) +
                        "': use not_guaranteed, run_to_run or portable");
}

void set_mode(Mode m) {
  g_mode.store(packed(m));
}

Mode mode() {
  const std::uint8_t v = g_mode.load();
  return {static_cast<Determinism>(v & ~kWarnOnlyBit), (v & kWarnOnlyBit) != 0};
}

DeterminismGuard::DeterminismGuard(Determinism level, std::optional<bool> warn_only)
    : previous_(t_guard) {
  const Mode outer = t_guard ? *t_guard : mode();
  t_guard = Mode{level, warn_only.value_or(outer.warn_only)};
}

DeterminismGuard::~DeterminismGuard() {
  t_guard = previous_;
}

Mode effective_mode(const Options& opts) {
  Mode m = t_guard ? *t_guard : mode();
  if (opts.level)
    m.level = *opts.level;
  return m;
}

} // namespace samebits

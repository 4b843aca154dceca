// The registry, the selection function, and the public coverage queries built on them.
#include "core/registry.hpp"

#include "core/backends.hpp"
#include "core/memory.hpp"
#include "core/test_hooks.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <iostream>
#include <set>

namespace samebits::detail {

void Registry::declare_op(const std::string& op) {
  if (std::find(ops_.begin(), ops_.end(), op) == ops_.end())
    ops_.push_back(op);
}

std::vector<VariantInfo> Registry::infos(std::string_view op) const {
  std::vector<VariantInfo> out;
  for (DeviceType b : {DeviceType::cpu, DeviceType::cuda})
    for (const auto& i : infos_)
      if ((op.empty() || i.op == op) && i.backend == b)
        out.push_back(i);
  return out;
}

Registry& registry() {
  static Registry r;
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_ops(r);
    register_cuda_ops(r);
  });
  return r;
}

namespace {

std::string levels_list(std::string_view op, DeviceType backend, const std::vector<Candidate>& cs) {
  std::string s;
  for (const auto& c : cs) {
    if (c.info->backend != backend)
      continue;
    if (!s.empty())
      s += ", ";
    s += fmt::format("{} ({})", c.info->name, to_string(c.info->level));
  }
  if (s.empty())
    return fmt::format("op '{}' has no {} variant", op, to_string(backend));
  return "variants: " + s;
}

} // namespace

Choice choose_variant(std::string_view op, DeviceType backend, const std::vector<Candidate>& cs,
                      Mode mode, std::string_view forced) {
  Choice ch;
  const std::string head =
      fmt::format("{} on {} at {}", op, to_string(backend), to_string(mode.level));
  std::string skipped, cannot; // every variant passed over; those that cannot take the arguments
  auto note = [&](const Candidate& c, std::string_view why) {
    skipped += fmt::format("; skipped {} ({}): {}", c.info->name, to_string(c.info->level), why);
  };
  // 1. The first implementable candidate that meets the level, in preference order.
  bool any_backend = false, any_implementable = false;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const auto& c = cs[i];
    if (c.info->backend != backend)
      continue;
    any_backend = true;
    if (!forced.empty() && c.info->name != forced)
      continue;
    if (!c.why_not.empty()) {
      note(c, c.why_not);
      cannot += fmt::format("; {} cannot take them: {}", c.info->name, c.why_not);
      continue;
    }
    any_implementable = true;
    if (!satisfies(c.info->level, mode.level)) {
      note(c, "below the requested level");
      continue;
    }
    ch.index = static_cast<int>(i);
    ch.explain = fmt::format("{}: ran {} ({}): first variant in preference order that meets the "
                             "level and takes these arguments{}",
                             head, c.info->name, to_string(c.info->level), skipped);
    return ch;
  }
  if (!forced.empty() && std::none_of(cs.begin(), cs.end(), [&](const Candidate& c) {
        return c.info->backend == backend && c.info->name == forced;
      })) {
    ch.explain = fmt::format("{}: no {} variant is named '{}'; {}", head, to_string(backend),
                             forced, levels_list(op, backend, cs));
    return ch;
  }
  if (!any_backend) {
    ch.unavailable = true;
    ch.explain = fmt::format("{}: {}", head, levels_list(op, backend, cs));
    return ch;
  }
  if (!any_implementable) {
    ch.explain = fmt::format("{}: no variant takes these arguments{}", head, skipped);
    return ch;
  }
  // 2. Nothing meets the level.
  ch.refused = true;
  if (!forced.empty()) {
    // The caller insisted on a variant below the level: say so, and what selection would run.
    const auto& f = *std::find_if(cs.begin(), cs.end(), [&](const Candidate& c) {
      return c.info->backend == backend && c.info->name == forced;
    });
    const Choice free = choose_variant(op, backend, cs, mode);
    ch.explain = fmt::format(
        "{}: the variant asked for, {}, guarantees only {}. Drop Options::variant to let samebits "
        "choose ({}), ask for a weaker level, or set warn-only mode to run it anyway",
        head, forced, to_string(f.info->level),
        free.index >= 0
            ? fmt::format("it would run {}", cs[static_cast<std::size_t>(free.index)].info->name)
            : "no variant meets the level either");
  } else {
    ch.explain = fmt::format("{}: no variant guarantees {} for these arguments ({}{}). Ask for a "
                             "weaker level, or set warn-only mode to run the best variant there is",
                             head, to_string(mode.level), levels_list(op, backend, cs), cannot);
  }
  if (!mode.warn_only)
    return ch;
  int best = -1;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const auto& c = cs[i];
    if (c.info->backend != backend || !c.why_not.empty())
      continue;
    if (!forced.empty() && c.info->name != forced)
      continue;
    if (best < 0 || c.info->level > cs[static_cast<std::size_t>(best)].info->level)
      best = static_cast<int>(i);
  }
  ch.index = best;
  ch.degraded = best >= 0;
  if (best >= 0) {
    const auto& c = cs[static_cast<std::size_t>(best)];
    ch.explain = fmt::format("{}: warn-only: no variant guarantees {}; ran {} ({}) instead", head,
                             to_string(mode.level), c.info->name, to_string(c.info->level));
  }
  return ch;
}

namespace {
thread_local std::string t_last_explain;
std::mutex g_warn_mutex;
std::set<std::string, std::less<>> g_warned;
std::function<void(const std::string&)> g_warning_handler;
} // namespace

void set_last_explain(std::string s) {
  t_last_explain = std::move(s);
}
void append_last_explain(std::string_view s) {
  t_last_explain.append(s);
}

void warn_once(const std::string& op, const std::string& message) {
  std::function<void(const std::string&)> handler;
  {
    std::lock_guard lock(g_warn_mutex);
    if (!g_warned.insert(op).second)
      return;
    handler = g_warning_handler;
  }
  if (handler)
    handler(message);
  else
    std::cerr << "samebits warning: " << message << '\n';
}

WorkspaceBuffer::WorkspaceBuffer(std::size_t bytes, Device device, Stream stream)
    : bytes_(bytes), device_(device), stream_(stream) {
  if (bytes_ > 0)
    data_ = allocate_bytes(bytes_, device_, stream_);
}
WorkspaceBuffer::~WorkspaceBuffer() {
  if (data_ != nullptr)
    free_bytes(data_, device_, stream_);
}

} // namespace samebits::detail

namespace samebits {

const std::string& last_explain() {
  return detail::t_last_explain;
}

void set_warning_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard lock(detail::g_warn_mutex);
  detail::g_warning_handler = std::move(handler);
}

void reset_warnings() {
  std::lock_guard lock(detail::g_warn_mutex);
  detail::g_warned.clear();
}

std::vector<std::string> op_names() {
  return detail::registry().ops();
}

std::vector<VariantInfo> list_variants(std::string_view op) {
  return detail::registry().infos(op);
}

SelectionPreview preview_selection(std::string_view op, DeviceType backend, Determinism level,
                                   bool warn_only) {
  auto infos = detail::registry().infos(op);
  std::vector<detail::Candidate> cs;
  for (const auto& i : infos)
    cs.push_back({&i, {}});
  auto ch = detail::choose_variant(op, backend, cs, Mode{level, warn_only});
  SelectionPreview p;
  p.runs = ch.index >= 0;
  p.degraded = ch.degraded;
  if (ch.index >= 0)
    p.variant = infos[static_cast<std::size_t>(ch.index)].name;
  p.explain = ch.explain;
  return p;
}

} // namespace samebits

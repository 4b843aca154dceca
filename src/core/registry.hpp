// The op registry: per op, a table of variants (name, backend, level, can_implement, workspace,
// run), filled by explicit register_*_ops calls, and the one selection function that every
// dispatch, every "explain" and the coverage table go through.
#pragma once
#include "core/memory.hpp"
#include "samebits/determinism.hpp"
#include "samebits/errors.hpp"
#include "samebits/registry.hpp"
#include "samebits/tensor.hpp"

#include <any>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <typeindex>
#include <vector>

namespace samebits::detail {

// Scratch memory handed to a variant, on the device the op runs on.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
  Stream stream{};
};

template <class Args> struct Variant {
  VariantInfo info;
  // Empty string: this variant can run these arguments. Otherwise the reason it cannot.
  std::function<std::string(const Args&)> why_not;
  std::function<std::size_t(const Args&)> workspace_bytes; // may be empty: no workspace
  std::function<void(const Args&, const Workspace&)> run;
};

// One entry of the list that selection looks at, in preference order.
struct Candidate {
  const VariantInfo* info = nullptr;
  std::string why_not; // empty: implementable for these arguments
};

struct Choice {
  int index = -1;           // into the candidate list; -1 when nothing can run
  bool degraded = false;    // warn-only ran a variant below the requested level
  bool refused = false;     // no variant meets the level (the call throws unless degraded)
  bool unavailable = false; // the op has no variant on this backend at all
  std::string explain;
};

// THE selection function: pure, deterministic, no timing. Keeps the candidates of `backend`
// whose level satisfies the request and that can implement the arguments, and picks the first
// in preference order. `forced` names a variant the caller insists on.
Choice choose_variant(std::string_view op, DeviceType backend,
                      const std::vector<Candidate>& candidates, Mode mode,
                      std::string_view forced = {});

class Registry {
public:
  void declare_op(const std::string& op);
  template <class Args> void add(Variant<Args> v) {
    auto& slot = tables_[v.info.op];
    if (!slot.has_value())
      slot = std::vector<Variant<Args>>{};
    auto* table = std::any_cast<std::vector<Variant<Args>>>(&slot);
    if (table == nullptr)
      throw Error("registry: variant '" + v.info.name + "' of op '" + v.info.op +
                  "' has argument type different from its table");
    declare_op(v.info.op);
    infos_.push_back(v.info);
    table->push_back(std::move(v));
  }
  template <class Args> const std::vector<Variant<Args>>& table(std::string_view op) const {
    static const std::vector<Variant<Args>> none;
    auto it = tables_.find(std::string(op));
    if (it == tables_.end())
      return none;
    auto* table = std::any_cast<std::vector<Variant<Args>>>(&it->second);
    if (table == nullptr)
      throw Error("registry: op '" + std::string(op) + "' looked up with the wrong argument type");
    return *table;
  }
  // Info of every variant of `op` (all when empty): backends in order cpu, cuda; table order.
  std::vector<VariantInfo> infos(std::string_view op) const;
  const std::vector<std::string>& ops() const { return ops_; }

private:
  std::map<std::string, std::any, std::less<>> tables_;
  std::vector<std::string> ops_;
  std::vector<VariantInfo> infos_;
};

// The process registry, filled on first use by register_cpu_ops and register_cuda_ops.
Registry& registry();

// Allocates a workspace of `bytes` on `device` for the lifetime of this object.
class WorkspaceBuffer {
public:
  WorkspaceBuffer(std::size_t bytes, Device device, Stream stream);
  ~WorkspaceBuffer();
  WorkspaceBuffer(const WorkspaceBuffer&) = delete;
  WorkspaceBuffer& operator=(const WorkspaceBuffer&) = delete;
  Workspace workspace() const { return {data_, bytes_, stream_}; }

private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
  Stream stream_;
};

void set_last_explain(std::string s);
// Adds what a variant did beyond its choice (a reused plan, say) to this thread's explanation.
void append_last_explain(std::string_view s);
// Emits `message` through the warning handler the first time `op` warns in this process.
void warn_once(const std::string& op, const std::string& message);

// Selects a variant of `op` for `args` on `device` and runs it. Throws NondeterministicError when
// no variant meets the level (unless warn-only), BackendUnavailable when the op has no variant on
// the device's backend, InvalidArgument when none can take the arguments.
template <class Args>
void dispatch(std::string_view op, Device device, const Args& args, const Options& opts) {
  const auto& table = registry().table<Args>(op);
  std::vector<Candidate> candidates;
  candidates.reserve(table.size());
  for (const auto& v : table) {
    Candidate c{&v.info, {}};
    if (v.info.backend == device.type && v.why_not)
      c.why_not = v.why_not(args);
    candidates.push_back(std::move(c));
  }
  const Mode m = effective_mode(opts);
  Choice choice = choose_variant(op, device.type, candidates, m, opts.variant);
  if (choice.index < 0) {
    set_last_explain(choice.explain); // a refused call explains itself too
    if (choice.unavailable)
      throw BackendUnavailable(choice.explain);
    if (choice.refused)
      throw NondeterministicError(choice.explain);
    throw InvalidArgument(choice.explain);
  }
  if (choice.degraded)
    warn_once(std::string(op), choice.explain);
  const auto& v = table[static_cast<std::size_t>(choice.index)];
  set_last_explain(std::move(choice.explain));
  const CurrentDevice on_device(device); // the op runs on its tensors' device
  const std::size_t bytes = v.workspace_bytes ? v.workspace_bytes(args) : 0;
  WorkspaceBuffer ws(bytes, device, opts.stream);
  v.run(args, ws.workspace());
}

} // namespace samebits::detail

// Divergence tracing: a recorder that, when enabled, writes one line per op call (step, layer,
// op, dtype, shape, content hash of the output, min, max, mean, L2 norm, a few sampled values,
// and the recording thread's context label) to a streamed JSON-lines file; and the comparison of
// two such files (`samebits diff`).
//
// Overhead when disabled: one relaxed load of a global flag per call site. Wrap call sites as
//   if (samebits::trace::enabled()) samebits::trace::record(step, "conv1", "aggregate", out);
// or use SAMEBITS_TRACE(step, layer, op, out), which does exactly that.
//
// File format (one JSON object per line):
//   line 1: {"samebits_trace":1,"version":...,"git":...,"environment":{...}}
//   then:   {"i":0,"step":3,"layer":"conv1","op":"aggregate","dtype":"float32","shape":[2708,16],
//            "hash":"0123456789abcdef","min":-1.5,"max":2.25,"mean":0.01,"l2":12.5,"nan":0,
//            "samples":[...],"context":"cuda not_guaranteed repeat run 2 of 3, seed 0"}
// "context" is present only while a trace::Context is alive on the recording thread.
// Non-finite statistics are written as the strings "nan", "inf", "-inf". Statistics are computed
// in float64 in row-major order, so they are themselves reproducible.
#pragma once
#include "samebits/tensor.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace samebits::trace {

namespace detail {
inline std::atomic<bool> g_enabled{false};
} // namespace detail

// True while a trace is being recorded.
inline bool enabled() noexcept {
  return detail::g_enabled.load(std::memory_order_relaxed);
}

// Starts recording to `path`. The entries go to `path`.partial, which replaces `path` when the
// recording stops, so a run that fails never leaves a cut-short trace under `path` (nor
// overwrites an earlier one there). Throws Error if the file cannot be opened or a trace is
// already being recorded.
void start(const std::string& path);
// Stops recording; `path`.partial becomes `path`. Does nothing if no trace is running.
void stop();
// Stops recording without replacing `path`: what was recorded stays in `path`.partial.
void abandon();
// Appends one entry (thread-safe; entries are numbered in the order calls reach the recorder).
// Copies `out` to the host to compute the statistics. Does nothing when disabled.
void record(std::int64_t step, std::string_view layer, std::string_view op, const TensorView& out);

// Records for its lifetime; left by an exception, it abandons the recording (see abandon()).
class Session {
public:
  explicit Session(const std::string& path) : pending_(std::uncaught_exceptions()) { start(path); }
  ~Session() noexcept(false) {
    if (std::uncaught_exceptions() > pending_)
      abandon();
    else
      stop();
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

private:
  int pending_;
};

// Labels the entries that this thread records during its lifetime ("context" in the file), so
// that a trace holding several runs says which run an entry belongs to. Contexts nest: the
// innermost one labels, and the enclosing one is back when it ends. Costs nothing while no trace
// is being recorded beyond keeping the label.
//   for (int run = 1; run <= runs; ++run) {
//     samebits::trace::Context ctx(fmt::format("run {}", run));
//     train(...);
//   }
class Context {
public:
  explicit Context(std::string label);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

private:
  std::string previous_;
};
// The label of the innermost live Context on this thread; empty when there is none.
const std::string& current_context() noexcept;

// Number of values sampled per entry, at positions floor(k * numel / kSamples), k = 0..7.
constexpr int kSamples = 8;

// One recorded entry, as read back.
struct Entry {
  std::int64_t index = 0;
  std::int64_t step = 0;
  std::string layer, op, dtype;
  Shape shape;
  std::string hash;
  double min = 0, max = 0, mean = 0, l2 = 0;
  std::int64_t nan_count = 0;
  std::vector<double> samples;
  std::string context; // empty when recorded outside any Context
};

struct TraceFile {
  std::string header; // the first line, as written (JSON)
  std::vector<Entry> entries;
};
// Reads a trace; throws DataError naming the file and line on malformed input.
TraceFile read(const std::string& path);

} // namespace samebits::trace

// Records only when tracing is on; the arguments are not evaluated otherwise.
#define SAMEBITS_TRACE(step, layer, op, out)                                                       \
  do {                                                                                             \
    if (::samebits::trace::enabled())                                                              \
      ::samebits::trace::record((step), (layer), (op), (out));                                     \
  } while (0)

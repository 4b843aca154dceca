// The trace recorder (one JSON line per recorded op output) and the trace reader.
#include "samebits/trace.hpp"

#include "core/strided.hpp"
#include "core/trace_stats.hpp"
#include "samebits/environment.hpp"
#include "samebits/errors.hpp"
#include "samebits/samebits.hpp"
#include "samebits/util/excerpt.hpp"
#include "samebits/util/files.hpp"
#include "samebits/util/json_text.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

namespace samebits::trace {

namespace {

using json = nlohmann::json;

struct Recorder {
  std::mutex m;
  std::unique_ptr<samebits::detail::OutputFile> file; // by the rule of core/files.hpp
  std::int64_t next_index = 0;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

thread_local std::string t_context;

// Finite values as numbers; NaN and infinities as strings, which JSON has no numbers for.
json number(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  return v;
}

double read_number(const json& j) {
  if (j.is_number())
    return j.get<double>();
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "nan")
      return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf")
      return std::numeric_limits<double>::infinity();
    if (s == "-inf")
      return -std::numeric_limits<double>::infinity();
  }
  throw std::invalid_argument("expected a number or \"nan\"/\"inf\"/\"-inf\"");
}

struct Stats {
  double min = 0, max = 0, mean = 0, l2 = 0;
  std::int64_t nan_count = 0;
  std::vector<double> samples;
};

// Statistics in float64, in row-major order (a fixed order, so they reproduce too).
Stats compute_stats(const Tensor& host) {
  Stats s;
  const std::int64_t n = host.numel();
  if (n == 0)
    return s;
  samebits::detail::visit_dtype(host.dtype(), [&]<class T>() {
    detail::Moments m = detail::moments(host.data<T>(), n, 1);
    s.nan_count = m.nan_count;
    const bool all_nan = s.nan_count == n;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.min = all_nan ? nan : m.lo;
    s.max = all_nan ? nan : m.hi;
    s.mean = s.nan_count > 0 ? nan : m.sum / static_cast<double>(n);
    s.l2 = s.nan_count > 0 ? nan : std::sqrt(m.sq);
    s.samples = std::move(m.samples);
  });
  return s;
}

} // namespace

bool has_common_hash(const Entry& a, const Entry& b) {
  return (!a.hash.empty() && !b.hash.empty()) || (!a.sum_hash.empty() && !b.sum_hash.empty());
}

bool same_output(const Entry& a, const Entry& b) {
  if (!has_common_hash(a, b))
    return false;
  const bool hash_ok = a.hash.empty() || b.hash.empty() || a.hash == b.hash;
  const bool sum_ok = a.sum_hash.empty() || b.sum_hash.empty() || a.sum_hash == b.sum_hash;
  return hash_ok && sum_ok;
}

Context::Context(std::string label) : previous_(std::exchange(t_context, std::move(label))) {}
Context::~Context() {
  t_context = std::move(previous_);
}
const std::string& current_context() noexcept {
  return t_context;
}

void start(const std::string& path) {
  auto& r = recorder();
  std::lock_guard lock(r.m);
  if (r.file != nullptr)
    throw Error(
        fmt::format("trace: already recording to '{}'; call trace::stop() first", r.file->path()));
  // The header first: nothing is created when describing the environment fails.
  const json header = {{"samebits_trace", 1},
                       {"version", std::string(version())},
                       {"git", std::string(git_revision())},
                       {"environment", json::parse(environment_json())}};
  const std::string line = samebits::detail::json_text(header) + "\n";
  // Recorded into PATH.partial, which replaces PATH when the recording stops (see stop/abandon);
  // a device, FIFO or standard stream is written in place (core/files.hpp).
  auto f = std::make_unique<samebits::detail::OutputFile>(path, "trace");
  f->write(line);
  f->flush();
  r.file = std::move(f);
  r.next_index = 0;
  detail::g_enabled.store(true, std::memory_order_release);
}

namespace {
// Ends the recording; `keep`: PATH.partial replaces PATH, else it stays beside an untouched PATH.
void finish(bool keep) {
  auto& r = recorder();
  std::lock_guard lock(r.m);
  detail::g_enabled.store(false, std::memory_order_release);
  if (r.file == nullptr)
    return;
  const std::unique_ptr<samebits::detail::OutputFile> f = std::move(r.file);
  if (keep)
    f->commit(); // throws when a write failed: the trace is incomplete
  else
    f->abandon(/*keep_partial=*/true);
}
} // namespace

void stop() {
  finish(true);
}
void abandon() {
  finish(false);
}

void record(std::int64_t step, std::string_view layer, std::string_view op, const TensorView& out) {
  if (!enabled())
    return;
  // The copy and the statistics run outside the lock; only numbering and writing are serial.
  const Tensor host = Tensor::copy_of(out, Device::cpu());
  const Stats s = compute_stats(host);
  json line = {{"i", 0},
               {"step", step},
               {"layer", std::string(layer)},
               {"op", std::string(op)},
               {"dtype", std::string(to_string(out.dtype))},
               {"shape", out.sizes()},
               {"hash", hash_hex(content_hash(host))},
               {"sum_hash", hash_hex(sum_hash(host))},
               {"min", number(s.min)},
               {"max", number(s.max)},
               {"mean", number(s.mean)},
               {"l2", number(s.l2)},
               {"nan", s.nan_count}};
  json samples = json::array();
  for (double v : s.samples)
    samples.push_back(number(v));
  line["samples"] = std::move(samples);
  if (!t_context.empty())
    line["context"] = t_context;
  auto& r = recorder();
  std::lock_guard lock(r.m);
  if (r.file == nullptr)
    return; // stopped meanwhile
  line["i"] = r.next_index++;
  const std::string text = samebits::detail::json_text(line) + "\n";
  r.file->write(text);
  // Flushed per entry so that a run that crashes still leaves a usable trace.
  r.file->flush();
}

TraceFile read(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw DataError(fmt::format("trace: cannot open '{}'", path));
  TraceFile t;
  std::string text;
  std::int64_t line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (text.empty())
      continue;
    try {
      const json j = json::parse(text);
      if (line_no == 1) {
        if (!j.contains("samebits_trace"))
          throw std::invalid_argument("not a samebits trace (no samebits_trace header)");
        if (j.at("samebits_trace") != 1)
          throw std::invalid_argument(
              fmt::format("trace format {} is not one this samebits reads (1)",
                          samebits::detail::printable_excerpt(
                              samebits::detail::json_text(j.at("samebits_trace")))));
        t.header = text;
        continue;
      }
      Entry e;
      e.index = j.at("i").get<std::int64_t>();
      e.step = j.at("step").get<std::int64_t>();
      e.layer = j.at("layer").get<std::string>();
      e.op = j.at("op").get<std::string>();
      e.dtype = j.at("dtype").get<std::string>();
      e.shape = j.at("shape").get<Shape>();
      e.hash = j.value("hash", "");
      e.sum_hash = j.value("sum_hash", "");
      if (e.hash.empty() && e.sum_hash.empty())
        throw std::invalid_argument("entry has neither \"hash\" nor \"sum_hash\"");
      e.min = read_number(j.at("min"));
      e.max = read_number(j.at("max"));
      e.mean = read_number(j.at("mean"));
      e.l2 = read_number(j.at("l2"));
      e.nan_count = j.at("nan").get<std::int64_t>();
      for (const auto& v : j.at("samples"))
        e.samples.push_back(read_number(v));
      e.context = j.value("context", "");
      e.source = j.value("source", "");
      e.caller = j.value("caller", "");
      e.grad_fn = j.value("grad_fn", "");
      t.entries.push_back(std::move(e));
    } catch (const json::parse_error& ex) {
      // The parser's own message quotes the bytes it read, which may be binary.
      throw DataError(fmt::format("trace: {}:{}: not a JSON line (error at byte {}): '{}'", path,
                                  line_no, ex.byte, samebits::detail::printable_excerpt(text)));
    } catch (const std::exception& ex) {
      throw DataError(fmt::format("trace: {}:{}: {}", path, line_no, ex.what()));
    }
  }
  if (line_no == 0)
    throw DataError(fmt::format("trace: '{}' is empty", path));
  return t;
}

} // namespace samebits::trace

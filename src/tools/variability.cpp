// Run-to-run variability of an op: N runs on fixed inputs, compared with the metrics of
// arXiv:2408.05148 (distinct outputs, elements that vary, elementwise and scalar relative
// variability).
#include "samebits/app/variability.hpp"

#include "samebits/environment.hpp"
#include "samebits/samebits.hpp"
#include "samebits/stream.hpp"
#include "samebits/util/host_values.hpp"
#include "samebits/util/json_text.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace samebits {

namespace {

std::vector<double> host_doubles(const Tensor& t) {
  return detail::host_values<double>(t);
}

// Bitwise comparison of two values that came from the same dtype (as doubles, exactly).
bool same_bits(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

double rel_diff(double x, double ref, double guard) {
  if (same_bits(x, ref))
    return 0.0;
  if (std::isnan(x) || std::isnan(ref) || std::isinf(x) || std::isinf(ref))
    return std::numeric_limits<double>::infinity();
  return std::fabs(x - ref) / std::max(std::fabs(ref), guard);
}

// |x - ref|, infinite where one side is NaN (fabs would give NaN, which std::max then drops).
double abs_diff(double x, double ref) {
  if (same_bits(x, ref))
    return 0.0;
  if (std::isnan(x) || std::isnan(ref))
    return std::numeric_limits<double>::infinity();
  return std::fabs(x - ref);
}

double full_sum(const std::vector<double>& v) {
  double s = 0; // float64, in order: the reduction adds no variability of its own
  for (double x : v)
    s += x;
  return s;
}

std::string variant_of(const std::string& explain) {
  const auto b = explain.find("ran ");
  if (b == std::string::npos)
    return "?";
  const auto e = explain.find(' ', b + 4);
  return explain.substr(b + 4, e == std::string::npos ? std::string::npos : e - b - 4);
}

} // namespace

VariabilityReport measure_variability(const std::string& op, const OpShape& shape,
                                      const VariabilityOptions& o) {
  if (o.runs < 1)
    throw InvalidArgument("variability: --runs must be at least 1");
  PreparedOp p = prepare_op(op, shape, o.device, o.seed);
  VariabilityReport r;
  r.op = p.op;
  r.description = p.description;
  r.device = to_string(o.device);
  r.level = std::string(to_string(o.level));
  r.runs = o.runs;
  r.elements = p.output.numel();
  r.guard = o.guard > 0 ? o.guard
                        : (p.output.dtype() == DType::f64 ? std::numeric_limits<double>::min()
                                                          : std::numeric_limits<float>::min());

  std::vector<double> ref;
  double ref_scalar = 0;
  if (o.reference_deterministic) {
    r.reference = "portable run";
    try {
      p.run({.level = Determinism::portable});
    } catch (const NondeterministicError&) {
      r.reference = "run_to_run run";
      p.run({.level = Determinism::run_to_run});
    }
    ref = host_doubles(p.output);
    ref_scalar = full_sum(ref);
  } else {
    r.reference = "first run";
  }

  std::set<std::uint64_t> hashes;
  std::vector<char> varies(static_cast<std::size_t>(r.elements), 0);
  std::vector<double> times;
  double rel_sum = 0, scalar_sum = 0;
  std::int64_t compared_runs = 0;
  for (int run = 0; run < o.runs; ++run) {
    synchronize(o.device);
    const auto t0 = std::chrono::steady_clock::now();
    p.run({.level = o.level});
    synchronize(o.device);
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (run == 0)
      r.variant = variant_of(last_explain());
    hashes.insert(content_hash(p.output));
    auto v = host_doubles(p.output);
    if (ref.empty() && !o.reference_deterministic) {
      ref = std::move(v);
      ref_scalar = full_sum(ref);
      continue;
    }
    ++compared_runs;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (same_bits(v[i], ref[i]))
        continue;
      varies[i] = 1;
      const double d = rel_diff(v[i], ref[i], r.guard);
      rel_sum += d;
      r.max_rel = std::max(r.max_rel, d);
      r.max_abs = std::max(r.max_abs, abs_diff(v[i], ref[i]));
    }
    const double sd = rel_diff(full_sum(v), ref_scalar, r.guard);
    scalar_sum += sd;
    r.scalar_max_rel = std::max(r.scalar_max_rel, sd);
  }
  r.distinct = static_cast<int>(hashes.size());
  r.varying = std::count(varies.begin(), varies.end(), 1);
  if (compared_runs > 0 && r.elements > 0)
    r.mean_rel = rel_sum / (static_cast<double>(compared_runs) * static_cast<double>(r.elements));
  if (compared_runs > 0)
    r.scalar_mean_rel = scalar_sum / static_cast<double>(compared_runs);
  std::sort(times.begin(), times.end());
  r.median_ms = times[times.size() / 2];
  return r;
}

std::string format_report(const VariabilityReport& r) {
  auto row = [](std::string_view k, const std::string& v) {
    return fmt::format("  {:<34}{}\n", k, v);
  };
  std::string s = fmt::format("variability of {}: {}\n", r.op, r.description);
  s += row("device, level", fmt::format("{}, {} (ran {})", r.device, r.level, r.variant));
  s += row("runs, reference", fmt::format("{}, compared with the {}", r.runs, r.reference));
  s += row("distinct outputs", fmt::format("{} of {} runs", r.distinct, r.runs));
  s += row("elements that vary", fmt::format("{} of {} ({:.2f}%)", r.varying, r.elements,
                                             r.elements ? 100.0 * static_cast<double>(r.varying) /
                                                              static_cast<double>(r.elements)
                                                        : 0.0));
  s += row("elementwise relative variability",
           fmt::format("mean {:.3g}, max {:.3g} (|x - ref| / max(|ref|, {:.3g}))", r.mean_rel,
                       r.max_rel, r.guard));
  s += row("largest absolute difference", fmt::format("{:.3g}", r.max_abs));
  s += row("scalar variability (float64 sum)",
           fmt::format("mean {:.3g}, max {:.3g}", r.scalar_mean_rel, r.scalar_max_rel));
  s += row("time per run (median)", fmt::format("{:.3f} ms", r.median_ms));
  return s;
}

std::string to_json(const VariabilityReport& r) {
  nlohmann::json j = {
      {"op", r.op},
      {"description", r.description},
      {"device", r.device},
      {"level", r.level},
      {"variant", r.variant},
      {"runs", r.runs},
      {"reference", r.reference},
      {"distinct_outputs", r.distinct},
      {"elements", r.elements},
      {"elements_that_vary", r.varying},
      {"elementwise_relative_variability", {{"mean", r.mean_rel}, {"max", r.max_rel}}},
      {"denominator_guard", r.guard},
      {"max_abs_difference", r.max_abs},
      {"scalar_relative_variability", {{"mean", r.scalar_mean_rel}, {"max", r.scalar_max_rel}}},
      {"median_ms", r.median_ms},
      {"environment", nlohmann::json::parse(environment_json())},
  };
  // Infinite differences (NaN on one side) have no JSON number: write them as strings.
  for (auto* key : {"max_abs_difference"})
    if (std::isinf(r.max_abs))
      j[key] = "inf";
  if (std::isinf(r.max_rel))
    j["elementwise_relative_variability"]["max"] = "inf";
  if (std::isinf(r.mean_rel))
    j["elementwise_relative_variability"]["mean"] = "inf";
  if (std::isinf(r.scalar_max_rel))
    j["scalar_relative_variability"]["max"] = "inf";
  if (std::isinf(r.scalar_mean_rel))
    j["scalar_relative_variability"]["mean"] = "inf";
  return detail::json_text(j, 2);
}

} // namespace samebits

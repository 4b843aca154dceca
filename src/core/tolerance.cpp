// Calibrated tolerances: spread of named tensors over runs, the JSON file, and the closeness check.
#include "samebits/tolerance.hpp"

#include "core/strided.hpp"
#include "samebits/environment.hpp"
#include "samebits/util/files.hpp"
#include "samebits/util/json_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace samebits {

namespace {

using detail::host_values;
std::vector<double> host_doubles(const TensorView& t) {
  return host_values<double>(t);
}

// |a - b| without overflow, rounded once to a double (at least 1 when a != b).
double integer_distance(std::int64_t a, std::int64_t b) {
  const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
  return static_cast<double>(a > b ? ua - ub : ub - ua);
}

// abs + rel * |expected|; an infinite abs or rel (calibrated on runs that gave NaN) allows any
// difference, also where expected is 0 (where inf * 0 would make the allowance NaN).
double allowed_difference(const Tolerance& tol, double expected) {
  if (std::isinf(tol.abs) || std::isinf(tol.rel))
    return INFINITY;
  return tol.abs + tol.rel * std::fabs(expected);
}

std::string shape_text(const Shape& s) {
  std::string t;
  for (std::size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return "[" + t + "]";
}

// Row-major multi-index of a flat index, for messages.
std::string index_text(std::int64_t flat, const Shape& s) {
  if (s.empty())
    return "[]";
  std::vector<std::int64_t> idx(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    idx[d] = s[d] ? flat % s[d] : 0;
    flat = s[d] ? flat / s[d] : 0;
  }
  std::string t;
  for (std::size_t d = 0; d < idx.size(); ++d)
    t += (d ? ", " : "") + std::to_string(idx[d]);
  return "[" + t + "]";
}

} // namespace

const Tolerance& Tolerances::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it != tensors.end())
    return it->second;
  std::string known;
  for (const auto& [k, v] : tensors)
    known += (known.empty() ? "" : ", ") + k;
  throw InvalidArgument(fmt::format("no tolerance for tensor '{}'; the calibration has: {}", name,
                                    known.empty() ? "(none)" : known));
}

Calibrator::Calibrator(double safety_factor, double rel_floor)
    : safety_(safety_factor), rel_floor_(rel_floor) {
  if (!(safety_factor >= 1.0))
    throw InvalidArgument(fmt::format("Calibrator: safety factor {} < 1", safety_factor));
}

void Calibrator::add(const std::string& name, const TensorView& value) {
  auto v = host_doubles(value);
  auto& s = spreads_[name];
  if (s.runs == 0) {
    s.shape = value.sizes();
    s.first = v;
    s.lo = v;
    s.hi = std::move(v);
  } else {
    if (value.sizes() != s.shape)
      throw InvalidArgument(fmt::format("Calibrator: tensor '{}' had shape {}, now {}", name,
                                        shape_text(s.shape), shape_text(value.sizes())));
    for (std::size_t i = 0; i < v.size(); ++i) {
      // NaN in any run makes the element's spread infinite unless it is NaN in every run.
      if (std::isnan(v[i]) != std::isnan(s.first[i])) {
        s.lo[i] = -INFINITY;
        s.hi[i] = INFINITY;
        continue;
      }
      s.lo[i] = std::min(s.lo[i], v[i]);
      s.hi[i] = std::max(s.hi[i], v[i]);
    }
  }
  ++s.runs;
}

Tolerances Calibrator::tolerances(const std::string& source) const {
  Tolerances t;
  t.safety_factor = safety_;
  t.source = source;
  t.environment_json = environment_json();
  for (const auto& [name, s] : spreads_) {
    t.runs = std::max(t.runs, s.runs);
    double largest = 0;
    for (double x : s.first)
      if (std::isfinite(x))
        largest = std::max(largest, std::fabs(x));
    const double floor = std::max(rel_floor_ * largest, 1e-300);
    Tolerance tol;
    tol.shape = s.shape;
    for (std::size_t i = 0; i < s.first.size(); ++i) {
      if (std::isnan(s.first[i]) && std::isnan(s.lo[i]))
        continue; // NaN in every run
      const double spread = s.hi[i] == s.lo[i] ? 0.0 : s.hi[i] - s.lo[i];
      tol.max_abs_diff = std::max(tol.max_abs_diff, spread);
      tol.max_rel_diff =
          std::max(tol.max_rel_diff, spread / std::max(std::fabs(s.first[i]), floor));
    }
    tol.abs = safety_ * tol.max_abs_diff;
    tol.rel = safety_ * tol.max_rel_diff;
    t.tensors[name] = tol;
  }
  return t;
}

std::string to_json(const Tolerances& t) {
  using json = nlohmann::json;
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json("inf"); };
  json tensors = json::object();
  for (const auto& [name, tol] : t.tensors)
    tensors[name] = {{"shape", tol.shape},
                     {"max_abs_diff", num(tol.max_abs_diff)},
                     {"max_rel_diff", num(tol.max_rel_diff)},
                     {"abs", num(tol.abs)},
                     {"rel", num(tol.rel)}};
  json j = {{"samebits_tolerances", 1},
            {"safety_factor", t.safety_factor},
            {"runs", t.runs},
            {"source", t.source},
            {"rule", "|actual - expected| <= abs + rel * |expected|, or both NaN, or equal"},
            {"tensors", tensors}};
  if (!t.environment_json.empty())
    j["environment"] = json::parse(t.environment_json);
  return detail::json_text(j, 2);
}

Tolerances tolerances_from_json(const std::string& text) {
  using json = nlohmann::json;
  auto num = [](const json& v) {
    if (v.is_string() && v.get<std::string>() == "inf")
      return INFINITY * 1.0;
    return v.get<double>();
  };
  try {
    const json j = json::parse(text);
    if (!j.contains("samebits_tolerances"))
      throw DataError("not a samebits tolerance file (no samebits_tolerances key)");
    Tolerances t;
    t.safety_factor = j.at("safety_factor").get<double>();
    t.runs = j.at("runs").get<int>();
    t.source = j.value("source", "");
    if (j.contains("environment"))
      t.environment_json = detail::json_text(j["environment"]);
    for (const auto& [name, v] : j.at("tensors").items()) {
      Tolerance tol;
      tol.shape = v.at("shape").get<Shape>();
      tol.max_abs_diff = num(v.at("max_abs_diff"));
      tol.max_rel_diff = num(v.at("max_rel_diff"));
      tol.abs = num(v.at("abs"));
      tol.rel = num(v.at("rel"));
      t.tensors[name] = tol;
    }
    return t;
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(std::string("tolerance file: ") + e.what());
  }
}

void save_tolerances(const Tolerances& t, const std::string& path) {
  detail::write_whole_file(path, to_json(t) + "\n", "tolerance file");
}

Tolerances load_tolerances(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw DataError(fmt::format("cannot open tolerance file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return tolerances_from_json(ss.str());
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", path, e.what()));
  }
}

CloseResult check_close(const TensorView& actual, const TensorView& expected,
                        const Tolerance& tol) {
  CloseResult r;
  if (actual.sizes() != expected.sizes()) {
    r.ok = false;
    r.message = fmt::format("shapes differ: actual {}, expected {}", actual.describe(),
                            expected.describe());
    return r;
  }
  if (!tol.shape.empty() && tol.shape != actual.sizes()) {
    r.ok = false;
    r.message = fmt::format("the tolerance was calibrated for shape {}, the tensors are {}",
                            shape_text(tol.shape), shape_text(actual.sizes()));
    return r;
  }
  const auto a = host_doubles(actual), e = host_doubles(expected);
  const bool integers = is_integer(actual.dtype) && is_integer(expected.dtype);
  const auto ai = integers ? host_values<std::int64_t>(actual) : std::vector<std::int64_t>{};
  const auto ei = integers ? host_values<std::int64_t>(expected) : std::vector<std::int64_t>{};
  r.elements = static_cast<std::int64_t>(a.size());
  double worst_ratio = -1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double diff = 0;
    if (integers) {
      if (ai[i] == ei[i])
        continue;
      diff = integer_distance(ai[i], ei[i]);
    } else {
      const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
      if (both_nan || a[i] == e[i])
        continue;
      diff = std::fabs(a[i] - e[i]);
    }
    const double allowed = allowed_difference(tol, e[i]);
    const bool pass = diff <= allowed; // false for NaN on one side or inf vs finite
    const double ratio = allowed > 0 ? diff / allowed : INFINITY;
    if (!pass) {
      ++r.failures;
      if (r.first_failure < 0)
        r.first_failure = static_cast<std::int64_t>(i);
    }
    if (!pass && (std::isnan(ratio) || ratio > worst_ratio || r.worst < 0)) {
      worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
      r.worst = static_cast<std::int64_t>(i);
      r.worst_actual = a[i];
      r.worst_expected = e[i];
      r.worst_allowed = allowed;
    }
  }
  r.ok = r.failures == 0;
  if (!r.ok) {
    const Shape s = actual.sizes();
    r.message = fmt::format(
        "{} of {} elements differ by more than abs {:.3g} + rel {:.3g} * |expected|; worst at {}: "
        "actual {:.9g}, expected {:.9g}, difference {:.3g}, allowed {:.3g} ({:.3g}x); first at {}",
        r.failures, r.elements, tol.abs, tol.rel, index_text(r.worst, s), r.worst_actual,
        r.worst_expected, std::fabs(r.worst_actual - r.worst_expected), r.worst_allowed,
        worst_ratio, index_text(r.first_failure, s));
  }
  return r;
}

} // namespace samebits

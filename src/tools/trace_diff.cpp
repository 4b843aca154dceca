// Comparing two traces: the first entry whose output differs, how far apart the two runs are
// there, and how the difference grows afterwards (per step, and as an SVG chart).
#include "samebits/app/trace_diff.hpp"

#include "samebits/util/excerpt.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

namespace samebits::trace {

namespace {

double rel(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b) ? 0.0 : std::numeric_limits<double>::infinity();
  if (a == b)
    return 0.0; // also equal infinities
  if (std::isinf(a) || std::isinf(b))
    return std::numeric_limits<double>::infinity();
  return std::fabs(a - b) / std::max({std::fabs(a), std::fabs(b), 1e-300});
}

std::string shape_text(const Shape& s) {
  std::string t;
  for (std::size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return "[" + t + "]";
}

// Names read from a trace file, made safe for a terminal (escaped, cut at 120 bytes).
std::string shown(std::string_view text) {
  return samebits::detail::printable_excerpt(text, 120);
}

// The same, also safe inside SVG text.
std::string shown_in_xml(std::string_view text) {
  return samebits::detail::xml_escaped(shown(text));
}

std::string sci(double v) {
  if (std::isinf(v))
    return "inf";
  if (v == 0)
    return "0";
  return fmt::format("{:.2e}", v);
}

} // namespace

double distance(const Entry& a, const Entry& b) {
  if (a.hash == b.hash)
    return 0.0;
  if (a.nan_count != b.nan_count)
    return std::numeric_limits<double>::infinity();
  double d = std::max({rel(a.min, b.min), rel(a.max, b.max), rel(a.mean, b.mean), rel(a.l2, b.l2)});
  const std::size_t k = std::min(a.samples.size(), b.samples.size());
  for (std::size_t i = 0; i < k; ++i)
    d = std::max(d, rel(a.samples[i], b.samples[i]));
  // Different bits with equal statistics: the difference lies between the sampled values. Report
  // the smallest positive distance so that it still shows as a difference.
  return d == 0 ? std::numeric_limits<double>::denorm_min() : d;
}

DiffReport diff(const TraceFile& a, const TraceFile& b) {
  DiffReport r;
  r.entries_a = static_cast<std::int64_t>(a.entries.size());
  r.entries_b = static_cast<std::int64_t>(b.entries.size());
  const std::size_t n = std::min(a.entries.size(), b.entries.size());
  std::map<std::pair<std::string, std::int64_t>, std::size_t> step_row; // (context, step) -> row
  for (std::size_t i = 0; i < n; ++i) {
    const Entry& x = a.entries[i];
    const Entry& y = b.entries[i];
    if (x.step != y.step || x.layer != y.layer || x.op != y.op || x.shape != y.shape ||
        x.dtype != y.dtype) {
      r.structure_mismatch = static_cast<std::int64_t>(i);
      r.structure_message = fmt::format(
          "entry {}: A has step {} {}/{} {}{}, B has step {} {}/{} {}{}: the runs did not execute "
          "the same sequence of ops",
          i, x.step, shown(x.layer), shown(x.op), shown(x.dtype), shape_text(x.shape), y.step,
          shown(y.layer), shown(y.op), shown(y.dtype), shape_text(y.shape));
      break;
    }
    EntryDiff d{static_cast<std::int64_t>(i),
                x.step,
                x.layer,
                x.op,
                x.context,
                x.hash == y.hash,
                distance(x, y)};
    if (!d.same_hash && r.first_diff < 0) {
      r.first_diff = d.index;
      r.first_a = x;
      r.first_b = y;
    }
    auto [it, inserted] = step_row.emplace(std::pair(x.context, x.step), r.steps.size());
    if (inserted)
      r.steps.push_back(StepDiff{x.context, x.step, 0, 0, 0.0});
    StepDiff& s = r.steps[it->second];
    ++s.entries;
    if (!d.same_hash)
      ++s.differing;
    s.max_distance = std::max(s.max_distance, d.distance);
    r.entries.push_back(std::move(d));
  }
  r.compared = static_cast<std::int64_t>(r.entries.size());
  return r;
}

std::string format_diff(const DiffReport& r) {
  std::string s =
      fmt::format("entries: A {}, B {}; compared {}\n", r.entries_a, r.entries_b, r.compared);
  if (r.structure_mismatch >= 0)
    s += "STRUCTURE DIFFERS at " + r.structure_message + "\n";
  else if (r.entries_a != r.entries_b)
    s += fmt::format("one trace is longer: only the first {} entries were compared\n", r.compared);
  if (r.first_diff < 0) {
    s += fmt::format("{}: all {} compared entries have identical output hashes\n",
                     r.agree() ? "no difference" : "the traces differ in length or structure",
                     r.compared);
    return s;
  }
  const Entry& a = r.first_a;
  const Entry& b = r.first_b;
  s += fmt::format("first difference: entry {}, step {}, layer '{}', op '{}', {}{}\n", a.index,
                   a.step, shown(a.layer), shown(a.op), shown(a.dtype), shape_text(a.shape));
  if (!a.context.empty() || !b.context.empty()) {
    s += fmt::format("  context  A: {}\n", a.context.empty() ? "(none)" : shown(a.context));
    s += fmt::format("           B: {}\n", b.context.empty() ? "(none)" : shown(b.context));
  }
  auto row = [&](std::string_view k, double x, double y) {
    s += fmt::format("  {:<8} {:>24.17g} {:>24.17g}   rel diff {}\n", k, x, y, sci(rel(x, y)));
  };
  s += fmt::format("  {:<8} {:>24} {:>24}\n", "", "A", "B");
  s += fmt::format("  {:<8} {:>24} {:>24}\n", "hash", a.hash, b.hash);
  row("min", a.min, b.min);
  row("max", a.max, b.max);
  row("mean", a.mean, b.mean);
  row("l2", a.l2, b.l2);
  double sd = 0;
  for (std::size_t i = 0; i < std::min(a.samples.size(), b.samples.size()); ++i)
    sd = std::max(sd, rel(a.samples[i], b.samples[i]));
  s += fmt::format("  largest relative difference of the {} sampled values: {}\n",
                   std::min(a.samples.size(), b.samples.size()), sci(sd));
  std::int64_t differing = 0;
  for (const auto& e : r.entries)
    differing += e.same_hash ? 0 : 1;
  s += fmt::format("entries that differ: {} of {}\n", differing, r.compared);

  // Growth per step: every step while there are few, else log-spaced steps after the first
  // difference (the early growth is where the story is), always including the last.
  const bool with_context = std::any_of(r.steps.begin(), r.steps.end(),
                                        [](const StepDiff& st) { return !st.context.empty(); });
  s += fmt::format("growth  {:>8} {:>8} {:>10} {:>14}{}\n", "step", "entries", "differing",
                   "max distance", with_context ? "  context (A)" : "");
  std::vector<std::size_t> rows;
  const std::size_t ns = r.steps.size();
  std::size_t first_row = 0;
  while (first_row < ns && r.steps[first_row].differing == 0)
    ++first_row;
  if (ns <= 30) {
    for (std::size_t i = 0; i < ns; ++i)
      rows.push_back(i);
  } else {
    if (first_row > 0)
      rows.push_back(first_row - 1);
    for (std::size_t k = 0; first_row + k < ns; k = k < 4 ? k + 1 : k * 2)
      rows.push_back(first_row + k);
    if (rows.back() != ns - 1)
      rows.push_back(ns - 1);
  }
  for (std::size_t i : rows) {
    const StepDiff& st = r.steps[i];
    s += fmt::format("        {:>8} {:>8} {:>10} {:>14}{}\n", st.step, st.entries, st.differing,
                     sci(st.max_distance), with_context ? "  " + shown(st.context) : "");
  }
  return s;
}

std::string diff_svg(const DiffReport& r) {
  // log10(distance) per entry; equal entries sit on the floor line.
  constexpr double W = 900, H = 420, L = 70, R = 20, T = 40, B = 50;
  constexpr double floor_exp = -10;
  double top_exp = -6;
  for (const auto& e : r.entries)
    if (e.distance > 0 && std::isfinite(e.distance))
      top_exp = std::max(top_exp, std::ceil(std::log10(e.distance)));
  top_exp = std::min(top_exp, 2.0);
  const double n = std::max<double>(1, static_cast<double>(r.entries.size()));
  auto x_of = [&](double i) { return L + (W - L - R) * i / std::max(1.0, n - 1); };
  auto y_of = [&](double d) {
    double e = d <= 0 ? floor_exp : std::isinf(d) ? top_exp : std::log10(d);
    e = std::clamp(e, floor_exp, top_exp);
    return T + (H - T - B) * (top_exp - e) / (top_exp - floor_exp);
  };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      W, H);
  s += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"14\">Distance between traces A and B per "
      "entry (log10 of largest relative difference; {} of {} entries differ)</text>\n",
      L,
      [&] {
        std::int64_t k = 0;
        for (const auto& e : r.entries)
          k += e.same_hash ? 0 : 1;
        return k;
      }(),
      r.entries.size());
  for (double e = floor_exp; e <= top_exp; e += 1) {
    const double y = y_of(std::pow(10.0, e));
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
                     "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                     L, y, W - R, y, L - 6, y + 4,
                     e == floor_exp ? std::string("equal") : fmt::format("1e{}", e));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">trace entry (op call)</text>\n",
                   (L + W - R) / 2, H - 12);
  for (std::size_t k = 0; k <= 4; ++k) {
    const double i = (n - 1) * static_cast<double>(k) / 4;
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(i),
                     H - B + 16, static_cast<std::int64_t>(std::llround(i)));
  }
  if (r.first_diff >= 0) {
    const double x = x_of(static_cast<double>(r.first_diff));
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#c00\" "
                     "stroke-dasharray=\"4 3\"/><text x=\"{3:.1f}\" y=\"{4}\" fill=\"#c00\">first "
                     "difference: entry {5} ({6}/{7})</text>\n",
                     x, T, H - B, x + 4, T + 12, r.first_diff, shown_in_xml(r.first_a.layer),
                     shown_in_xml(r.first_a.op));
  }
  std::string pts;
  for (const auto& e : r.entries)
    pts += fmt::format("{:.1f},{:.1f} ", x_of(static_cast<double>(e.index)), y_of(e.distance));
  s += "<polyline fill=\"none\" stroke=\"#36c\" stroke-width=\"1\" points=\"" + pts + "\"/>\n";
  if (r.entries.size() <= 5000)
    for (const auto& e : r.entries)
      if (!e.same_hash)
        s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"#c00\"/>\n",
                         x_of(static_cast<double>(e.index)), y_of(e.distance));
  return s + "</svg>\n";
}

} // namespace samebits::trace

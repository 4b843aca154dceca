// HTML + inline SVG rendering of the GraphSAGE experiment report (see report.hpp).
#include "samebits/app/report.hpp"

#include "samebits/errors.hpp"
#include "samebits/util/excerpt.hpp"
#include "samebits/util/files.hpp"
#include "samebits/util/json_text.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

namespace samebits::nn {

namespace {

using nlohmann::json;

std::string esc(const std::string& s) {
  return samebits::detail::xml_escaped(s);
}

std::string color_of(const json& g) {
  if (g["kind"] == "seeds")
    return "#7f7f7f";
  const std::string l = g["level"];
  if (l == "not_guaranteed")
    return "#d62728";
  if (l == "run_to_run")
    return "#1f77b4";
  return "#2ca02c";
}

std::string label_of(const json& g) {
  std::string l = g["device"].get<std::string>() + " " + g["level"].get<std::string>();
  if (g["kind"] == "seeds")
    l += fmt::format(" ({} seeds)", g["runs"].get<int>());
  return l;
}

std::string dash_of(const json& g) {
  return g["device"].get<std::string>().rfind("cuda", 0) == 0 ? " stroke-dasharray=\"6 3\"" : "";
}

// A horizontal bar chart: one bar per group, value printed at the end of the bar. Bars are scaled
// to the largest value, or, with `of_key`, each to its own group's g[of_key] (the number of runs:
// 1 of 20 is then a twentieth of the bar, and the label says "1 of 20").
// One group's line of a line chart (points "x,y x,y ...") and its legend entry at (x, y), to the
// right of the plot area.
std::string line_series(const json& g, const std::string& pts, int x, int y) {
  return fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>"
                     "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" "
                     "stroke-width=\"2\"{}/><text x=\"{}\" y=\"{}\">{}</text>",
                     pts, color_of(g), dash_of(g), x + 15, x + 40, y, y, color_of(g), dash_of(g),
                     x + 45, y + 4, esc(label_of(g)));
}

std::string bar_chart(const json& groups, const std::string& title, const std::string& key,
                      const std::string& unit, double scale, const char* value_fmt,
                      const std::string& of_key = "") {
  const int row = 26, left = 250, width = 440, top = 30;
  const int h = top + row * static_cast<int>(groups.size()) + 20;
  double maxv = 0;
  for (const auto& g : groups)
    maxv = std::max(maxv, g[key].get<double>() * scale);
  if (maxv <= 0)
    maxv = 1;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">"
      "<text x=\"4\" y=\"18\" class=\"t\">{}</text>",
      left + width + 110, h, esc(title));
  int y = top;
  for (const auto& g : groups) {
    const double v = g[key].get<double>() * scale;
    const double full = of_key.empty() ? maxv : std::max(1.0, g[of_key].get<double>());
    const double w = std::max(1.0, width * std::min(1.0, v / full));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 6, y + 15,
                     esc(label_of(g)));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"18\" fill=\"{}\"/>", left,
                     y + 2, w, color_of(g));
    if (!of_key.empty()) // the whole of the bar: where "all runs distinct" would reach
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\" fill=\"none\" "
                       "stroke=\"#bbb\"/>",
                       left, y + 2, width);
    const std::string value = fmt::format(fmt::runtime(value_fmt), v);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>",
                     of_key.empty() ? left + w + 5 : left + width + 5.0, y + 15,
                     of_key.empty() ? value + " " + unit
                                    : fmt::format("{} of {}", value, g[of_key].get<long>()));
    y += row;
  }
  return s + "</svg>";
}

// Weight drift per epoch on a log scale; exact zeros are drawn on a separate "identical" line.
// It follows the first `tracked` runs of each group (the experiment's --track-runs).
std::string drift_chart(const json& groups, long tracked) {
  const int left = 100, top = 30, w = 560, h = 300, bottom = top + h;
  double lo = 1e300, hi = 0;
  std::size_t epochs = 0;
  for (const auto& g : groups)
    for (double d : g["weight_diff_per_epoch"]) {
      if (d > 0 && std::isfinite(d)) {
        lo = std::min(lo, d);
        hi = std::max(hi, d);
      }
      epochs = std::max(epochs, g["weight_diff_per_epoch"].size());
    }
  if (hi == 0)
    lo = 1e-8, hi = 1;
  const int dlo = static_cast<int>(std::floor(std::log10(lo))) - 1;
  const int dhi = static_cast<int>(std::ceil(std::log10(hi)));
  const int zero_y = bottom + 24;
  auto ypos = [&](double d) {
    if (!(d > 0))
      return static_cast<double>(zero_y);
    return bottom - h * (std::log10(d) - dlo) / std::max(1, dhi - dlo);
  };
  auto xpos = [&](std::size_t e) {
    return left +
           w * static_cast<double>(e) / static_cast<double>(std::max<std::size_t>(1, epochs - 1));
  };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">"
      "<text x=\"4\" y=\"18\" class=\"t\">Largest |w - w(run 1)| after each epoch (log "
      "scale), over runs 2 to {} of each group; the table covers all runs</text>",
      left + w + 260, zero_y + 40, std::max(2L, tracked));
  for (int d = dlo; d <= dhi; ++d) {
    const double y = ypos(std::pow(10.0, d));
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"g\"/>"
                     "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">1e{}</text>",
                     left, left + w, y, y, left - 4, y + 4, d);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">0 (identical)</text>", left - 4,
                   zero_y + 4);
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" class=\"g\"/>", left, left + w,
                   zero_y, zero_y);
  for (std::size_t e = 0; e < epochs; e += std::max<std::size_t>(1, epochs / 10))
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", xpos(e),
                     zero_y + 20, e);
  int legend_y = top + 10;
  for (const auto& g : groups) {
    const auto& d = g["weight_diff_per_epoch"];
    if (g["runs"].get<int>() < 2)
      continue;
    std::string pts;
    for (std::size_t e = 0; e < d.size(); ++e)
      pts += fmt::format("{:.1f},{:.1f} ", xpos(e), ypos(d[e].get<double>()));
    s += line_series(g, pts, left + w, legend_y);
    legend_y += 18;
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">epoch</text>", left + w / 2,
                   zero_y + 36);
  return s + "</svg>";
}

// Accuracy distribution: one row per group, a circle per distinct accuracy (area ~ count).
std::string accuracy_chart(const json& groups) {
  const int left = 250, w = 440, top = 30, row = 30;
  double lo = 1, hi = 0;
  for (const auto& g : groups)
    for (double a : g["test_accuracy"]["values"])
      lo = std::min(lo, a), hi = std::max(hi, a);
  if (hi <= lo)
    lo -= 0.01, hi += 0.01;
  const double pad = (hi - lo) * 0.05;
  lo -= pad;
  hi += pad;
  auto xpos = [&](double a) { return left + w * (a - lo) / (hi - lo); };
  const int h = top + row * static_cast<int>(groups.size()) + 30;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">"
      "<text x=\"4\" y=\"18\" class=\"t\">Test accuracy per run (circle area: number of "
      "runs)</text>",
      left + w + 30, h);
  for (int i = 0; i <= 4; ++i) {
    const double a = lo + (hi - lo) * i / 4;
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" class=\"g\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:.3f}</text>",
                     xpos(a), top, h - 25, h - 8, a);
  }
  int y = top;
  for (const auto& g : groups) {
    std::map<double, int> counts;
    for (double a : g["test_accuracy"]["values"])
      ++counts[a];
    const double total = g["runs"].get<double>();
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 6, y + 18,
                     esc(label_of(g)));
    for (const auto& [a, n] : counts)
      s += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{}\" r=\"{:.1f}\" fill=\"{}\" fill-opacity=\"0.6\">"
          "<title>{:.4f}: {} runs</title></circle>",
          xpos(a), y + 14, 2.5 + 9 * std::sqrt(n / total), color_of(g), a, n);
    y += row;
  }
  return s + "</svg>";
}

std::string results_table(const json& groups) {
  std::string s =
      "<table><tr><th>device</th><th>level</th><th>runs</th><th>distinct weight sets</th>"
      "<th>test acc mean</th><th>std</th><th>min</th><th>max</th><th>max |w - w1|</th>"
      "<th>ms / run</th><th>first hash</th><th>variants</th></tr>";
  for (const auto& g : groups) {
    const auto& a = g["test_accuracy"];
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td><td>{:.4f}</td><td>{:.4f}</td>"
        "<td>{:.4f}</td><td>{:.4f}</td><td>{:.3g}</td><td>{:.2f}</td><td><code>{}</code></td>"
        "<td class=\"small\">{}</td></tr>",
        esc(g["device"]),
        esc(g["kind"] == "seeds" ? "seeds at " + g["level"].get<std::string>()
                                 : g["level"].get<std::string>()),
        g["runs"].get<int>(), g["distinct_weight_sets"].get<int>(), a["mean"].get<double>(),
        a["std"].get<double>(), a["min"].get<double>(), a["max"].get<double>(),
        g["max_weight_diff"].get<double>(), g["seconds_per_run"].get<double>() * 1e3,
        esc(g["first_hash"]), esc(g["variants"]));
  }
  return s + "</table>";
}

// A JSON value as a reader wants it: strings as they are, null and empty lists or objects as
// "(none)", lists of plain values joined by commas, objects as nested tables.
std::string value_html(const json& v);

std::string kv_table(const json& obj) {
  if (obj.empty())
    return "(none)";
  std::string s = "<table class=\"kv\">";
  for (const auto& [k, v] : obj.items())
    s += fmt::format("<tr><th>{}</th><td>{}</td></tr>", esc(k), value_html(v));
  return s + "</table>";
}

std::string value_html(const json& v) {
  if (v.is_null() || (v.is_array() && v.empty()) || (v.is_object() && v.empty()))
    return "<span class=\"small\">(none)</span>";
  if (v.is_string())
    return v.get<std::string>().empty() ? "<span class=\"small\">(empty)</span>"
                                        : esc(v.get<std::string>());
  if (v.is_object())
    return kv_table(v);
  if (v.is_array()) {
    const bool plain =
        std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_primitive(); });
    std::string s;
    for (const auto& e : v)
      s += plain ? (s.empty() ? "" : ", ") + value_html(e) : "<div>" + value_html(e) + "</div>";
    return s;
  }
  if (v.is_boolean())
    return v.get<bool>() ? "yes" : "no";
  return esc(detail::json_text(v));
}

// Training loss of run 1 per epoch, one line per group (linear scale).
std::string loss_chart(const json& groups) {
  const int left = 100, top = 30, w = 560, h = 220, bottom = top + h;
  double lo = 1e300, hi = -1e300;
  std::size_t epochs = 0;
  for (const auto& g : groups) {
    epochs = std::max(epochs, g["loss_run1"].size());
    for (const auto& l : g["loss_run1"])
      if (l.is_number() && std::isfinite(l.get<double>()))
        lo = std::min(lo, l.get<double>()), hi = std::max(hi, l.get<double>());
  }
  if (epochs == 0 || lo > hi)
    return "<p>No training loss was recorded.</p>";
  if (hi - lo < 1e-12)
    lo -= 0.5, hi += 0.5;
  auto xpos = [&](std::size_t e) {
    return left +
           w * static_cast<double>(e) / static_cast<double>(std::max<std::size_t>(1, epochs - 1));
  };
  auto ypos = [&](double l) { return bottom - h * (l - lo) / (hi - lo); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">"
      "<text x=\"4\" y=\"18\" class=\"t\">Training loss of run 1 per epoch</text>",
      left + w + 260, bottom + 40);
  for (int i = 0; i <= 4; ++i) {
    const double l = lo + (hi - lo) * i / 4;
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"g\"/>"
                     "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3f}</text>",
                     left, left + w, ypos(l), ypos(l), left - 4, ypos(l) + 4, l);
  }
  for (std::size_t e = 0; e < epochs; e += std::max<std::size_t>(1, epochs / 10))
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", xpos(e),
                     bottom + 16, e + 1);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">epoch</text>", left + w / 2,
                   bottom + 32);
  int legend_y = top + 10;
  for (const auto& g : groups) {
    std::string pts;
    std::size_t e = 0;
    for (const auto& l : g["loss_run1"]) {
      if (l.is_number() && std::isfinite(l.get<double>()))
        pts += fmt::format("{:.1f},{:.1f} ", xpos(e), ypos(l.get<double>()));
      ++e;
    }
    s += line_series(g, pts, left + w, legend_y);
    legend_y += 18;
  }
  return s + "</svg>";
}

// One line per repeated group: "reproducible: yes / no, N of M distinct", with the caveat that
// one weight set at not_guaranteed proves nothing.
std::string verdicts(const json& groups) {
  std::string s = "<ul class=\"verdicts\">";
  for (const auto& g : groups) {
    if (g["kind"] != "repeat")
      continue;
    const long d = g["distinct_weight_sets"].get<long>(), n = g["runs"].get<long>();
    const bool ng = g["level"] == "not_guaranteed";
    std::string line;
    if (n < 2)
      line = "reproducible: <b>not tested</b> (1 run)";
    else
      line = fmt::format("reproducible: <b class=\"{}\">{}</b>, {} of {} runs distinct",
                         d == 1 ? "ok" : (ng ? "warn" : "bad"), d == 1 ? "yes" : "no", d, n);
    if (ng && d == 1 && n > 1)
      line += " &mdash; <i>no variation seen proves nothing: at not_guaranteed the order of "
              "atomic adds can change with the thread count, the load, the machine or the "
              "GPU</i>";
    s += fmt::format("<li>{}: {}</li>", esc(label_of(g)), line);
  }
  return s + "</ul>";
}

// What a reader can do next, from what the results show.
std::string next_steps(const json& r) {
  const json& groups = r.at("groups");
  bool varied = false, has_portable = false;
  for (const auto& g : groups)
    if (g["kind"] == "repeat") {
      varied = varied || (g["level"] == "not_guaranteed" && g["distinct_weight_sets"] != 1);
      has_portable = has_portable || g["level"] == "portable";
    }
  std::string s = "<h2>What to do next</h2><ul>";
  if (!r.value("complete", true))
    s += "<li>This run was interrupted: run it again to completion for every group.</li>";
  if (varied)
    s += "<li>Train at <code>run_to_run</code> (same bits on every run here) or "
         "<code>portable</code> (also across thread counts, GPUs and CPU vs GPU): "
         "<code>samebits::set_mode({Determinism::run_to_run})</code>, or pass the level in each "
         "op's options.</li>";
  if (!r.at("cross_device").at("applicable").get<bool>() && has_portable)
    s += "<li>On a machine with a GPU, add <code>--device cpu,cuda</code> to check that the "
         "portable weights are the same bits on the CPU and the GPU.</li>";
  s += "<li>To find where two runs part, record both with <code>--trace FILE</code> (few runs) and "
       "compare them with <code>samebits diff A B</code>.</li>"
       "<li>For tests that compare against tolerances instead of bits, measure the spread with "
       "<code>samebits calibrate</code>.</li></ul>";
  return s;
}

} // namespace

std::string render_report(const json& r) {
  const json& groups = r.at("groups");
  const json& ds = r.at("dataset");
  const json& cfg = r.at("config");
  std::string cross;
  const json& x = r.at("cross_device");
  if (x.at("applicable").get<bool>()) {
    std::string hs;
    for (const auto& [d, h] : x.at("portable_hashes").items())
      hs += fmt::format(" {} <code>{}</code>", esc(d), esc(h.get<std::string>()));
    const bool cpu_and_gpu = x.value("cpu_and_gpu", false);
    cross = fmt::format("<p class=\"{}\">Cross-device check at <b>portable</b>: weight hashes{} "
                        "&rarr; <b>{}</b>.</p>",
                        x["equal"].get<bool>() ? "ok" : "bad", hs,
                        x["equal"].get<bool>() ? (cpu_and_gpu ? "identical bits on CPU and GPU"
                                                              : "identical bits on every GPU")
                                               : "DIFFERENT");
  } else {
    cross = "<p>Cross-device check: run with <code>--device cpu,cuda</code> to compare the "
            "portable weights of the CPU and the GPU.</p>";
  }
  std::string out = R"(<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>samebits: GraphSAGE reproducibility report</title><style>
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
table.kv{max-width:100%;table-layout:fixed}table.kv td{overflow-wrap:anywhere;word-break:break-word}
table.kv table.kv{margin:0;font-size:13px}.warn{color:#b26a00}pre.cmd{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:6px}
th{background:#f4f4f4}svg{display:block;margin:1.5em 0;font-size:12px}svg .t{font-size:14px;font-weight:600}
svg .g{stroke:#ddd}.ok{color:#1a7f37}.bad{color:#c62828;font-weight:700}.small{font-size:11px;color:#555}
code{font-size:12px}</style></head><body>
)";
  out += fmt::format(
      "<h1>GraphSAGE on {} &mdash; reproducibility</h1>"
      "<p>{} nodes, {} edges, {} features, {} classes ({} training, {} test nodes). Each row "
      "trains a 2-layer GraphSAGE (hidden {}, dropout {}, Adam lr {}, weight decay {}) for {} "
      "epochs, {} times with the same seed (<code>{}</code>), and counts distinct weight sets "
      "by a hash of all parameters. The seed row trains different seeds once each: the spread "
      "a seed causes, next to the spread nondeterminism causes.</p>",
      esc(ds["name"]), ds["nodes"].get<long>(), ds["edges"].get<long>(), ds["features"].get<long>(),
      ds["classes"].get<long>(), ds["train"].get<long>(), ds["test"].get<long>(),
      cfg["hidden"].get<long>(), cfg["dropout"].get<double>(), cfg["lr"].get<double>(),
      cfg["weight_decay"].get<double>(), cfg["epochs"].get<int>(), cfg["runs"].get<int>(),
      cfg["seed"].get<std::uint64_t>());
  const std::string command = r.value("command", "");
  out += fmt::format("<p class=\"small\">Started {}, finished {}.</p>",
                     esc(r.value("started", "(not recorded)")),
                     esc(r.value("finished", "(not recorded)")));
  if (!command.empty())
    out += "<pre class=\"cmd\">" + esc(command) + "</pre>";
  if (!r.value("complete", true))
    out += fmt::format("<p class=\"bad\">INTERRUPTED ({}): only the groups that completed are "
                       "shown.</p>",
                       esc(r.value("interrupted", "")));
  out += verdicts(groups);
  out += results_table(groups) + cross;
  json repeat = json::array();
  for (const auto& g : groups)
    if (g["kind"] == "repeat")
      repeat.push_back(g);
  for (auto& g : repeat)
    g["distinct"] = g["distinct_weight_sets"].get<double>();
  out += bar_chart(repeat, "Distinct weight sets per level (the full bar: every run distinct)",
                   "distinct", "", 1, "{:.0f}", "runs");
  out += drift_chart(groups, cfg.value("track_runs", 8L));
  out += loss_chart(groups);
  out += accuracy_chart(groups);
  out += bar_chart(groups, "Time per training (including evaluation)", "seconds_per_run", "ms", 1e3,
                   "{:.2f}");
  out += next_steps(r);
  out += "<h2>Configuration</h2>" + kv_table(cfg);
  out += "<h2>Environment</h2>" + kv_table(r.at("environment"));
  out += "</body></html>\n";
  return out;
}

void check_report_path(const std::filesystem::path& path) {
  detail::check_writable(path.string(), "report");
}

void write_report(const std::filesystem::path& path, const json& results) {
  detail::write_whole_file(path.string(), render_report(results), "report");
}

} // namespace samebits::nn

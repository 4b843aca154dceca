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

// A horizontal bar chart: one bar per group, value printed at the end of the bar.
std::string bar_chart(const json& groups, const std::string& title, const std::string& key,
                      const std::string& unit, double scale, const char* value_fmt) {
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
    const double w = std::max(1.0, width * v / maxv);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 6, y + 15,
                     esc(label_of(g)));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"18\" fill=\"{}\"/>", left,
                     y + 2, w, color_of(g));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{} {}</text>", left + w + 5, y + 15,
                     fmt::format(fmt::runtime(value_fmt), v), unit);
    y += row;
  }
  return s + "</svg>";
}

// Weight drift per epoch on a log scale; exact zeros are drawn on a separate "identical" line.
std::string drift_chart(const json& groups) {
  const int left = 70, top = 30, w = 560, h = 300, bottom = top + h;
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
      "scale)</text>",
      left + w + 260, zero_y + 40);
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
    s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>",
                     pts, color_of(g), dash_of(g));
    s += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>"
        "<text x=\"{}\" y=\"{}\">{}</text>",
        left + w + 15, left + w + 40, legend_y, legend_y, color_of(g), dash_of(g), left + w + 45,
        legend_y + 4, esc(label_of(g)));
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

std::string kv_table(const json& obj) {
  std::string s = "<table>";
  for (const auto& [k, v] : obj.items())
    s += fmt::format("<tr><th>{}</th><td>{}</td></tr>", esc(k),
                     esc(v.is_string() ? v.get<std::string>() : detail::json_text(v)));
  return s + "</table>";
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
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
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
  out += results_table(groups) + cross;
  json repeat = json::array();
  for (const auto& g : groups)
    if (g["kind"] == "repeat")
      repeat.push_back(g);
  for (auto& g : repeat)
    g["distinct"] = g["distinct_weight_sets"].get<double>();
  out += bar_chart(repeat, "Distinct weight sets per level (out of the runs)", "distinct", "", 1,
                   "{:.0f}");
  out += drift_chart(groups);
  out += accuracy_chart(groups);
  out += bar_chart(groups, "Time per training (including evaluation)", "seconds_per_run", "ms", 1e3,
                   "{:.2f}");
  out += "<h2>Configuration</h2>" + kv_table(cfg);
  out += "<h2>Environment</h2>" + kv_table(r.at("environment"));
  out += "</body></html>\n";
  return out;
}

namespace {
void make_parent_directories(const std::filesystem::path& path) {
  if (path.has_parent_path())
    std::filesystem::create_directories(path.parent_path());
}
} // namespace

void check_report_path(const std::filesystem::path& path) {
  make_parent_directories(path);
  detail::check_writable(path.string(), "report");
}

void write_report(const std::filesystem::path& path, const json& results) {
  make_parent_directories(path);
  detail::write_whole_file(path.string(), render_report(results), "report");
}

} // namespace samebits::nn

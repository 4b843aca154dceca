// What the experiment's table, JSON and report and `samebits diff` tell a reader (issue 23): bars
// scaled to the runs, a distance that a near-zero mean cannot inflate, verdicts and caveats, no
// raw null or [] in the report; and the checks around them: the model's size and warnings, the
// bundled data's search path, duplicate edges, an experiment stopped at a run boundary.
#include "samebits/app/cora.hpp"
#include "samebits/app/experiment.hpp"
#include "samebits/app/model_size.hpp"
#include "samebits/app/report.hpp"
#include "samebits/app/trace_diff.hpp"
#include "samebits/errors.hpp"
#include "samebits/trace.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <string>
#include <unistd.h>

using namespace samebits;
using namespace samebits::nn;
namespace fs = std::filesystem;

namespace {

// A group as the experiment's JSON holds it.
nlohmann::json group_json(const std::string& level, int runs, int distinct) {
  nlohmann::json g = {
      {"kind", "repeat"},
      {"device", "cpu"},
      {"level", level},
      {"runs", runs},
      {"distinct_weight_sets", distinct},
      {"first_hash", "f75ef51ce8ad47b4"},
      {"test_accuracy",
       {{"mean", 0.7}, {"std", 0.0}, {"min", 0.7}, {"max", 0.7}, {"values", {0.7}}}},
      {"max_weight_diff", distinct > 1 ? 1e-7 : 0.0},
      {"weight_diff_per_epoch", {0.0, distinct > 1 ? 1e-8 : 0.0}},
      {"loss_run1", {1.9, 1.7}},
      {"seconds_per_run", 0.05},
      {"seconds_total", 0.05 * runs},
      {"seconds_min", 0.05},
      {"variants", "aggregate: cpu.atomic_edges"},
      {"threads", 2},
      {"hashes", nlohmann::json::array()}};
  return g;
}

nlohmann::json results_json() {
  nlohmann::json j;
  j["experiment"] = "graphsage";
  j["complete"] = true;
  j["command"] = "samebits experiment graphsage --runs 20";
  j["started"] = "2026-12-01T22:00:00Z";
  j["finished"] = "2026-12-01T22:01:00Z";
  j["dataset"] = {{"name", "cora"}, {"nodes", 2708}, {"edges", 10556}, {"features", 1433},
                  {"classes", 7},   {"train", 140},  {"test", 1000}};
  j["config"] = {{"data", "data/cora"}, {"runs", 20},        {"epochs", 1}, {"seed", 0},
                 {"hidden", 16},        {"dropout", 0.5},    {"lr", 0.01},  {"weight_decay", 5e-4},
                 {"track_runs", 8},     {"devices", {"cpu"}}};
  j["groups"] = {group_json("not_guaranteed", 20, 1), group_json("run_to_run", 20, 1)};
  j["cross_device"] = {{"applicable", false},
                       {"equal", false},
                       {"cpu_and_gpu", false},
                       {"portable_hashes", nlohmann::json::object()}};
  j["environment"] = {{"compiler", "GCC 12"},
                      {"gpus", nlohmann::json::array()},
                      {"driver", nullptr},
                      {"variables", {{"OMP_NUM_THREADS", nullptr}, {"SAMEBITS_NUM_THREADS", "2"}}},
                      {"flags", "-O3 -DNDEBUG -ffp-contract=off -fno-fast-math"}};
  return j;
}

// The width of the first filled bar after `label` in the distinct-weight-sets chart.
double bar_width_after(const std::string& html, const std::string& label) {
  const auto chart = html.find("Distinct weight sets per level");
  const auto at = html.find(label + "</text>", chart);
  const std::regex width("width=\"([0-9.]+)\" height=\"18\" fill=\"#");
  std::smatch m;
  const std::string rest = html.substr(at);
  if (!std::regex_search(rest, m, width))
    return -1;
  return std::stod(m[1]);
}

} // namespace

TEST(Report, DistinctBarsAreScaledToTheRuns) {
  nlohmann::json j = results_json();
  j["groups"][0]["distinct_weight_sets"] = 20; // every run distinct: the whole bar
  j["groups"][1]["distinct_weight_sets"] = 1;  // 1 of 20: a twentieth of it
  const std::string html = render_report(j);
  const double all = bar_width_after(html, "cpu not_guaranteed");
  const double one = bar_width_after(html, "cpu run_to_run");
  EXPECT_NEAR(one / all, 1.0 / 20, 1e-9) << html;
  EXPECT_NE(html.find(">1 of 20</text>"), std::string::npos);
  EXPECT_NE(html.find(">20 of 20</text>"), std::string::npos);
}

TEST(Report, SaysWhatItRanWhenAndWhatItFound) {
  const std::string html = render_report(results_json());
  EXPECT_NE(html.find("samebits experiment graphsage --runs 20"), std::string::npos);
  EXPECT_NE(html.find("Started 2026-12-01T22:00:00Z"), std::string::npos);
  EXPECT_NE(
      html.find("cpu run_to_run: reproducible: <b class=\"ok\">yes</b>, 1 of 20 runs distinct"),
      std::string::npos);
  // One weight set at not_guaranteed is not evidence of reproducibility.
  EXPECT_NE(html.find("no variation seen proves nothing"), std::string::npos);
  EXPECT_NE(html.find("Training loss of run 1 per epoch"), std::string::npos);
  EXPECT_NE(html.find("What to do next"), std::string::npos);
  EXPECT_NE(html.find("over runs 2 to 8 of each group; the table covers all runs"),
            std::string::npos);
}

TEST(Report, ShowsNoRawNullOrEmptyListAndWrapsLongValues) {
  const std::string html = render_report(results_json());
  EXPECT_EQ(html.find(">null<"), std::string::npos);
  EXPECT_EQ(html.find(">[]<"), std::string::npos);
  EXPECT_EQ(html.find(">{}<"), std::string::npos);
  EXPECT_NE(html.find("(none)"), std::string::npos);
  EXPECT_NE(html.find("overflow-wrap:anywhere"), std::string::npos);
  // Nested objects are tables, not JSON text.
  EXPECT_EQ(html.find("{&quot;"), std::string::npos);
}

TEST(Report, TheIdenticalLabelFitsLeftOfTheChart) {
  const std::string html = render_report(results_json());
  const std::regex label(
      "<text x=\"([0-9.]+)\" y=\"[0-9.]+\" text-anchor=\"end\">0 \\(identical\\)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, label));
  // Right-aligned at x: 13 characters of a 12 px sans-serif font need about 80 px.
  EXPECT_GE(std::stod(m[1]), 85.0);
}

TEST(Report, AnInterruptedRunSaysSo) {
  nlohmann::json j = results_json();
  j["complete"] = false;
  j["interrupted"] = "cpu portable: 3 of 20 runs done";
  const std::string html = render_report(j);
  EXPECT_NE(html.find("INTERRUPTED (cpu portable: 3 of 20 runs done)"), std::string::npos);
}

TEST(Table, OneWeightSetAtNotGuaranteedCarriesACaveat) {
  ExperimentResult r;
  r.threads = 2;
  GroupResult g;
  g.kind = "repeat";
  g.level = Determinism::not_guaranteed;
  g.runs = 5;
  g.threads = 2;
  g.hashes.assign(5, 42);
  g.test_acc.assign(5, 0.7);
  g.seconds.assign(5, 0.01);
  r.groups.push_back(g);
  const std::string t = format_table(r);
  EXPECT_NE(t.find("cpu not_guaranteed: reproducible: yes, 1 distinct weight set in 5 runs"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("No variation seen proves nothing"), std::string::npos) << t;
  r.groups[0].hashes[3] = 7;
  EXPECT_EQ(format_table(r).find("No variation seen"), std::string::npos);
  EXPECT_NE(format_table(r).find("reproducible: no, 2 distinct weight sets in 5 runs"),
            std::string::npos);
}

TEST(Diff, ANearZeroMeanDoesNotInflateTheDistance) {
  // Two outputs whose l2 norms differ by 1e-9 (relative) and whose means, near 1e-13, differ by
  // 90%: the old measure said 0.9.
  trace::Entry a, b;
  a.hash = "a";
  b.hash = "b";
  a.l2 = 10.0;
  b.l2 = 10.0 * (1 + 1e-9);
  a.mean = 1e-13;
  b.mean = 1.9e-13;
  a.min = b.min = -1;
  a.max = b.max = 1;
  a.samples = {1.0, -1.0, 0.5, 1e-14};
  b.samples = {1.0, -1.0, 0.5, 2e-14};
  const double d = trace::distance(a, b);
  EXPECT_GT(d, 0.0);
  EXPECT_LT(d, 2e-9) << "distance " << d;
  EXPECT_NEAR(d, 1e-9, 1e-10);
  // A sampled value that moves by 1% of the output's norm shows as 1e-2.
  b.l2 = a.l2;
  b.samples = a.samples;
  b.samples[2] = 0.5 + 0.01 * std::sqrt(1 + 1 + 0.25 + 1e-28);
  EXPECT_NEAR(trace::distance(a, b), 1e-2, 1e-4);
  // Bits that differ with equal recorded values are still a difference, labelled "bits only".
  b.samples = a.samples;
  EXPECT_GT(trace::distance(a, b), 0.0);
}

TEST(Diff, TheDistanceIsNamedInTheTextAndTheChart) {
  trace::TraceFile ta, tb;
  trace::Entry e;
  e.op = "gemm";
  e.shape = {2, 2};
  e.dtype = "float32";
  e.l2 = 1;
  e.samples = {1, 0};
  e.hash = "a";
  ta.entries.push_back(e);
  e.hash = "b";
  e.l2 = 1 + 1e-6;
  tb.entries.push_back(e);
  const auto r = trace::diff(ta, tb);
  EXPECT_NE(trace::format_diff(r).find("normwise relative difference"), std::string::npos);
  EXPECT_NE(trace::diff_svg(r).find("normwise relative difference"), std::string::npos);
}

TEST(ModelSize, CountsWarnsAndRefusesBeforeAllocating) {
  Dataset d;
  d.num_nodes = 3;
  d.num_features = 16777216; // one stray index of 2^24 - 1
  d.num_classes = 65536;     // one stray label of 65535
  d.labels = {0, 1, 65535};
  d.features.rows = 3;
  d.features.cols_count = d.num_features;
  d.features.offsets = {0, 1, 2, 3};
  d.features.cols = {0, 1, 16777215};
  SageConfig cfg;
  cfg.hidden = 16;
  const ModelSize s = model_size(d, cfg);
  EXPECT_EQ(s.used_features, 3);
  EXPECT_EQ(s.used_classes, 3);
  EXPECT_EQ(s.parameters, 2 * 16777216LL * 16 + 16 + 2 * 16 * 65536LL + 65536);
  EXPECT_GT(s.device_bytes, 4.0 * 4 * static_cast<double>(s.parameters));
  const auto w = size_warnings(s);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("declares 16777216 feature columns"), std::string::npos);
  EXPECT_NE(w[1].find("declares 65536 classes"), std::string::npos);
  EXPECT_NE(describe(s).find("model: 16777216 features -> 16 hidden -> 65536 classes"),
            std::string::npos);
  cfg.hidden = 1 << 20; // ~140 TB: no machine has it
  if (available_host_bytes() > 0) {
    EXPECT_THROW(check_fits(model_size(d, cfg)), Error);
  }
  d.num_features = 3; // a sound data set: no warning
  d.num_classes = 3;
  d.labels = {0, 1, 2};
  d.features.cols = {0, 1, 2};
  cfg.hidden = 16;
  EXPECT_TRUE(size_warnings(model_size(d, cfg)).empty());
  EXPECT_NO_THROW(check_fits(model_size(d, cfg)));
}

TEST(Loader, DuplicateEdgesAreCountedAndNamed) {
  const fs::path dir = fs::temp_directory_path() / ("samebits_dups_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "nodes.tsv")
      << "node\tlabel\tsplit\tfeatures\n0\t0\ttrain\t0\n1\t1\ttest\t1\n";
  std::ofstream(dir / "edges.tsv") << "src\tdst\n0\t1\n1\t0\n\n0\t1\n1\t0\n0\t1\n";
  const Dataset d = load_dataset(dir);
  fs::remove_all(dir);
  EXPECT_EQ(d.num_edges(), 5) << "duplicates are kept";
  EXPECT_EQ(d.duplicate_edges, 3);
  EXPECT_NE(d.first_duplicate.find("edges.tsv line 5: 0 -> 1 (first at line 2)"), std::string::npos)
      << d.first_duplicate;
  const Dataset cora = load_dataset("data/cora");
  EXPECT_EQ(cora.duplicate_edges, 0) << "data/cora/README.md says Cora has none";
}

TEST(BundledData, LooksBesideTheProgramAndSaysWhereItLooked) {
  const auto c = bundled_data_candidates("cora");
  ASSERT_GE(c.size(), 2u);
  EXPECT_NE(c.front().string().find("/share/samebits/data/cora"), std::string::npos) << c.front();
  EXPECT_TRUE(fs::exists(bundled_data_dir("cora") / "nodes.tsv"));
  try {
    first_data_dir({"/nonexistent/a/cora", "/nonexistent/b/cora"}, "cora");
    ADD_FAILURE() << "found a data set that does not exist";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("looked in:\n  /nonexistent/a/cora\n  /nonexistent/b/cora"), std::string::npos)
        << m;
    EXPECT_NE(m.find("--data DIR"), std::string::npos) << m;
  }
}

TEST(Experiment, StopsAtARunBoundaryAndKeepsTheCompleteGroups) {
  ExperimentConfig cfg;
  cfg.runs = 3;
  cfg.epochs = 1;
  cfg.levels = {Determinism::portable, Determinism::run_to_run};
  const Dataset data = load_experiment_data(cfg);
  int asked = 0;
  // Asked before every group and after every run: the 6th time is after the first run of the
  // second group (1: before group 1; 2-4: its runs; 5: before group 2; 6: its first run).
  const ExperimentResult r = run_experiment(cfg, data, {}, [&] { return ++asked >= 6; });
  EXPECT_FALSE(r.complete);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].level, Determinism::portable);
  EXPECT_EQ(r.groups[0].hashes.size(), 3u);
  EXPECT_EQ(r.interrupted, "cpu run_to_run: 1 of 3 runs done");
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["groups"].size(), 1u);
  EXPECT_NE(format_table(r).find("INTERRUPTED: cpu run_to_run: 1 of 3 runs done"),
            std::string::npos);
}

TEST(Experiment, TheCpuNotGuaranteedGroupRunsWithMoreThreadsThanCores) {
  ExperimentConfig cfg;
  EXPECT_GE(group_threads(cfg, Device::cpu(), Determinism::not_guaranteed, 2), 16);
  EXPECT_EQ(group_threads(cfg, Device::cpu(), Determinism::run_to_run, 2), 2);
  EXPECT_EQ(group_threads(cfg, Device::cpu(), Determinism::portable, 2), 2);
  cfg.race_threads = -1;
  EXPECT_EQ(group_threads(cfg, Device::cpu(), Determinism::not_guaranteed, 2), 2);
  cfg.race_threads = 5;
  EXPECT_EQ(group_threads(cfg, Device::cpu(), Determinism::not_guaranteed, 2), 5);
}

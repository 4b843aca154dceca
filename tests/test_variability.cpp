// Variability measurement: deterministic levels give 1 distinct output and zero variability;
// the not_guaranteed CPU variant shows variation with several threads; the metrics are computed
// as documented; every op in the table prepares and runs; JSON carries the environment.
#include "samebits/app/variability.hpp"
#include "testing.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace samebits {
namespace {

// `s` without the options that op `e` does not read (measure_variability refuses those).
OpShape read_by(const OpEntry& e, OpShape s) {
  if (!(e.reads & kReadsN))
    s.n = 0;
  if (!(e.reads & kReadsRows))
    s.rows = 0;
  if (!(e.reads & kReadsFeatures))
    s.features = 0;
  if (!(e.reads & kReadsDim))
    s.dim = 0;
  if (!(e.reads & kReadsReduce))
    s.reduce.clear();
  return s;
}

TEST(Variability, DeterministicLevelsGiveOneDistinctOutput) {
  testing::ThreadCount tc(4);
  for (const char* op : {"sum", "index_add", "sum_dim"}) {
    for (Determinism level : {Determinism::run_to_run, Determinism::portable}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(to_string(level)));
      const auto r = measure_variability(op, read_by(find_op(op), {.n = 200000, .rows = 300}),
                                         {.runs = 10, .level = level});
      EXPECT_EQ(r.distinct, 1);
      EXPECT_EQ(r.varying, 0);
      EXPECT_EQ(r.mean_rel, 0.0);
      EXPECT_EQ(r.max_rel, 0.0);
      EXPECT_EQ(r.scalar_max_rel, 0.0);
      EXPECT_FALSE(r.variant.empty());
    }
  }
}

TEST(Variability, AtomicVariantVariesWithThreads) {
  testing::ThreadCount tc(4);
  // Many adds per output: 1M sources into 100 rows. The atomic CPU variant's order depends on
  // thread timing; on a busy machine a few runs can still coincide, so allow many runs.
  VariabilityReport r;
  for (int attempt = 0; attempt < 5; ++attempt) {
    r = measure_variability("index_add", {.n = 1000000, .rows = 100, .features = -1},
                            {.runs = 20, .level = Determinism::not_guaranteed});
    if (r.distinct > 1)
      break;
  }
  ASSERT_GT(r.distinct, 1) << "the not_guaranteed variant never varied";
  EXPECT_GT(r.varying, 0);
  EXPECT_GT(r.max_rel, 0.0);
  EXPECT_LT(r.max_rel, 1.0);
  EXPECT_GE(r.max_rel, r.mean_rel);
  EXPECT_GT(r.max_abs, 0.0);
  EXPECT_GE(r.scalar_max_rel, 0.0);
  // Against a portable reference every run is compared.
  const auto p = measure_variability(
      "index_add", {.n = 100000, .rows = 100, .features = -1},
      {.runs = 3, .level = Determinism::portable, .reference_deterministic = true});
  EXPECT_EQ(p.reference, "portable run");
  EXPECT_EQ(p.varying, 0);
}

TEST(Variability, EveryTableEntryRunsOnSmallShapes) {
  for (const auto& e : variability_ops()) {
    SCOPED_TRACE(e.name);
    const OpShape s = read_by(e, {.n = 2000, .rows = 50, .features = 8});
    const auto r = measure_variability(e.name, s, {.runs = 2, .level = Determinism::portable});
    EXPECT_GT(r.elements, 0);
    EXPECT_EQ(r.distinct, 1);
    EXPECT_NE(r.description.find("float32"), std::string::npos) << r.description;
    EXPECT_NE(format_report(r).find("distinct outputs"), std::string::npos);
  }
  EXPECT_THROW(prepare_op("nope", {}, Device::cpu(), 1), InvalidArgument);
}

// Options an op does not read are refused, not ignored; so is --features -1 where an op has no
// 1-d form (it used to fall back to one feature, or fail deep inside as a negative size).
TEST(Variability, OptionsAnOpDoesNotReadAreRefused) {
  auto message = [](const std::string& op, const OpShape& s) {
    return testing::caught<InvalidArgument>([&] { check_shape(find_op(op), s); })
        .value_or("accepted");
  };
  EXPECT_EQ(message("sum", {.rows = 5}), "--rows does not apply to sum (it reads --n)");
  EXPECT_EQ(message("sum", {.rows = 5, .reduce = "amax"}),
            "--rows, --reduce do not apply to sum (it reads --n)");
  EXPECT_EQ(message("index_add", {.dim = 1}),
            "--dim does not apply to index_add (it reads --n, --rows, --features)");
  EXPECT_EQ(message("index_add", {.reduce = "sum"}),
            "--reduce does not apply to index_add (it reads --n, --rows, --features)");
  for (const char* op : {"aggregate", "sum_dim", "gemm"})
    EXPECT_EQ(message(op, {.features = -1}),
              fmt::format("--features -1 (1-d tensors) does not apply to {}: give 1 or more", op));
  for (const char* op : {"index_add", "scatter_add", "scatter_reduce", "segment_reduce"})
    EXPECT_EQ(message(op, {.n = 10, .rows = 3, .features = -1}), "accepted") << op;
  EXPECT_EQ(message("scatter_reduce", {.reduce = "amax"}), "accepted");
  EXPECT_EQ(message("sum_dim", {.rows = 4, .features = 3, .dim = 1}), "accepted");
  // measure_variability goes through the same check.
  EXPECT_THROW(measure_variability("sum", {.n = 100, .rows = 5}, {.runs = 1}), InvalidArgument);
  // Every op's defaults pass its own check.
  for (const auto& e : variability_ops())
    EXPECT_EQ(message(e.name, e.defaults), "accepted") << e.name;
}

TEST(Variability, JsonEmbedsTheEnvironment) {
  const auto r =
      measure_variability("dot", {.n = 1000}, {.runs = 2, .level = Determinism::portable});
  const auto j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["op"], "dot");
  EXPECT_EQ(j["distinct_outputs"], 1);
  EXPECT_TRUE(j["environment"].contains("samebits_version"));
  EXPECT_EQ(j["elementwise_relative_variability"]["max"], 0.0);
}

} // namespace
} // namespace samebits

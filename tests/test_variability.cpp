// Variability measurement: deterministic levels give 1 distinct output and zero variability;
// the not_guaranteed CPU variant shows variation with several threads; the metrics are computed
// as documented; every op in the table prepares and runs; JSON carries the environment.
#include "samebits/variability.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing.hpp"

namespace samebits {
namespace {

TEST(Variability, DeterministicLevelsGiveOneDistinctOutput) {
  testing::ThreadCount tc(4);
  for (const char* op : {"sum", "index_add", "sum_dim"}) {
    for (Determinism level : {Determinism::run_to_run, Determinism::portable}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(to_string(level)));
      const auto r = measure_variability(op, {.n = 200000, .rows = 300, .features = 0},
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
    if (r.distinct > 1) break;
  }
  ASSERT_GT(r.distinct, 1) << "the not_guaranteed variant never varied";
  EXPECT_GT(r.varying, 0);
  EXPECT_GT(r.max_rel, 0.0);
  EXPECT_LT(r.max_rel, 1.0);
  EXPECT_GE(r.max_rel, r.mean_rel);
  EXPECT_GT(r.max_abs, 0.0);
  EXPECT_GE(r.scalar_max_rel, 0.0);
  // Against a portable reference every run is compared.
  const auto p = measure_variability("index_add", {.n = 100000, .rows = 100, .features = -1},
                                     {.runs = 3, .level = Determinism::portable,
                                      .reference_deterministic = true});
  EXPECT_EQ(p.reference, "portable run");
  EXPECT_EQ(p.varying, 0);
}

TEST(Variability, EveryTableEntryRunsOnSmallShapes) {
  for (const auto& e : variability_ops()) {
    SCOPED_TRACE(e.name);
    OpShape s{.n = 2000, .rows = 50, .features = e.name == "sum_dim" || e.name == "gemm" ? 8 : 0};
    const auto r = measure_variability(e.name, s, {.runs = 2, .level = Determinism::portable});
    EXPECT_GT(r.elements, 0);
    EXPECT_EQ(r.distinct, 1);
    EXPECT_NE(r.description.find("float32"), std::string::npos) << r.description;
    EXPECT_NE(format_report(r).find("distinct outputs"), std::string::npos);
  }
  EXPECT_THROW(prepare_op("nope", {}, Device::cpu(), 1), InvalidArgument);
}

TEST(Variability, JsonEmbedsTheEnvironment) {
  const auto r = measure_variability("dot", {.n = 1000}, {.runs = 2, .level = Determinism::portable});
  const auto j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["op"], "dot");
  EXPECT_EQ(j["distinct_outputs"], 1);
  EXPECT_TRUE(j["environment"].contains("samebits_version"));
  EXPECT_EQ(j["elementwise_relative_variability"]["max"], 0.0);
}

}  // namespace
}  // namespace samebits

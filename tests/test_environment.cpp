// The environment report: fields filled, JSON parseable, text complete, settings reflected.
#include "samebits/environment.hpp"
#include "samebits/samebits.hpp"
#include "samebits/util/num_threads_env.hpp"
#include "testing.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <xmmintrin.h>

namespace samebits {
namespace {

TEST(Environment, ReportsBuildAndMachine) {
  const Environment e = environment();
  EXPECT_EQ(e.version, version());
  EXPECT_EQ(e.git_revision, git_revision());
  EXPECT_FALSE(e.cxx_compiler.empty());
  EXPECT_TRUE(e.fp_contract_off);
  EXPECT_FALSE(e.fast_math);
  EXPECT_FALSE(e.cpu_model.empty());
  EXPECT_GE(e.hardware_threads, 1);
  EXPECT_EQ(e.samebits_threads, num_threads());
  EXPECT_TRUE(e.fp_flags_known);
  EXPECT_FALSE(e.ftz);
  EXPECT_FALSE(e.daz);
  EXPECT_EQ(e.gpus.empty(), !cuda_available());
#if defined(SAMEBITS_HAS_CUDA)
  EXPECT_TRUE(e.cuda_compiled);
  EXPECT_FALSE(e.cuda_flags.empty());
#else
  EXPECT_FALSE(e.cuda_compiled);
#endif
  for (const auto& g : e.gpus) {
    EXPECT_GT(g.sm_count, 0);
    EXPECT_GT(g.cc_major, 0);
  }
}

TEST(Environment, JsonParsesAndHasEveryVariable) {
  ::setenv("SAMEBITS_TEST_HOOK", "42", 1);
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1);
  const auto j = nlohmann::json::parse(environment_json());
  for (const auto& name : result_affecting_variables())
    EXPECT_TRUE(j["env"].contains(name)) << name;
  EXPECT_EQ(j["env"]["SAMEBITS_TEST_HOOK"], "42");
  EXPECT_EQ(j["env"]["CUBLAS_WORKSPACE_CONFIG"], ":4096:8");
  EXPECT_EQ(j["samebits_version"], std::string(version()));
  EXPECT_TRUE(j.contains("gpus"));
  EXPECT_TRUE(j["promise"].is_string());
  ::unsetenv("SAMEBITS_TEST_HOOK");
  ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
}

// A variable holding bytes that are not UTF-8 is written with U+FFFD in their place: the JSON
// (and every report, trace and tolerance file that embeds it) is still written.
TEST(Environment, JsonSurvivesBytesThatAreNotUtf8) {
  ::setenv("CUBLAS_WORKSPACE_CONFIG",
           "a\xff"
           "b",
           1);
  std::string text;
  ASSERT_NO_THROW(text = environment_json());
  ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["env"]["CUBLAS_WORKSPACE_CONFIG"], "a\xef\xbf\xbd"
                                                 "b");
}

TEST(Environment, PromiseFollowsTheMode) {
  const Mode saved = mode();
  set_mode({Determinism::portable, false});
  auto e = environment();
  EXPECT_EQ(e.level, Determinism::portable);
  EXPECT_NE(e.promise.find("on the CPU"), std::string::npos) << e.promise;
  set_mode({Determinism::run_to_run, true});
  e = environment();
  EXPECT_NE(e.promise.find("warn-only"), std::string::npos) << e.promise;
  set_mode({Determinism::not_guaranteed, false});
  e = environment();
  EXPECT_NE(e.promise.find("may change"), std::string::npos) << e.promise;
  set_mode(saved);
  const auto text = environment_text();
  for (const char* key :
       {"C++ compiler", "FTZ / DAZ", "CUBLAS_WORKSPACE_CONFIG", "promise", "CUDA"})
    EXPECT_NE(text.find(key), std::string::npos) << key << "\n" << text;
}

TEST(Environment, DetectsFlushToZero) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);
  const Environment e = environment();
  _mm_setcsr(saved);
  EXPECT_TRUE(e.ftz);
  EXPECT_TRUE(e.daz);
  ASSERT_FALSE(e.warnings.empty());
  EXPECT_NE(e.warnings[0].find("FTZ"), std::string::npos);
}

// SAMEBITS_NUM_THREADS: a whole number in [1, 1024], or unset/empty; anything else is refused
// with the variable and its value (escaped where it is not printable) in the message.
TEST(Environment, NumThreadsVariableIsCheckedStrictly) {
  const char* before = std::getenv("SAMEBITS_NUM_THREADS");
  const std::string saved = before ? before : "";
  ::unsetenv("SAMEBITS_NUM_THREADS");
  EXPECT_EQ(detail::num_threads_from_environment(), std::nullopt);
  for (const auto& [value, want] : {std::pair{"", 0}, {"1", 1}, {"4", 4}, {"1024", 1024}}) {
    ::setenv("SAMEBITS_NUM_THREADS", value, 1);
    EXPECT_EQ(detail::num_threads_from_environment().value_or(0), want) << "'" << value << "'";
  }
  auto refusal = [](const char* value) {
    ::setenv("SAMEBITS_NUM_THREADS", value, 1);
    return testing::caught<InvalidArgument>([] { detail::num_threads_from_environment(); })
        .value_or("accepted");
  };
  for (const char* value :
       {"abc", "-3", "0", "99999999999", "1025", "4 ", " 4", "+4", "4.0", "0x10", "8abc"})
    EXPECT_NE(refusal(value).find("SAMEBITS_NUM_THREADS='" + std::string(value) + "'"),
              std::string::npos)
        << refusal(value);
  EXPECT_NE(refusal("\xff\x1b[2J").find("SAMEBITS_NUM_THREADS='\\xff\\x1b[2J'"), std::string::npos)
      << refusal("\xff\x1b[2J");
  if (before)
    ::setenv("SAMEBITS_NUM_THREADS", saved.c_str(), 1);
  else
    ::unsetenv("SAMEBITS_NUM_THREADS");
}

} // namespace
} // namespace samebits

// Selection, modes, guards, warn-only and the errors that name the op.
#include "core/registry.hpp"
#include "core/test_hooks.hpp"
#include "testing.hpp"

#include <gmock/gmock.h>
#include <map>
#include <random>
#include <tuple>

namespace samebits {
namespace {

using ::testing::HasSubstr;

detail::Candidate cand(const VariantInfo& i, std::string why = {}) {
  return {&i, std::move(why)};
}

VariantInfo info(const char* name, Determinism level, DeviceType b = DeviceType::cpu) {
  return {"fake_op", name, b, level, "test"};
}

TEST(Selection, PicksFirstQualifyingInPreferenceOrder) {
  auto a = info("a_atomic", Determinism::not_guaranteed);
  auto b = info("b_sorted", Determinism::run_to_run);
  auto c = info("c_portable", Determinism::portable);
  std::vector<detail::Candidate> cs{cand(a), cand(b), cand(c)};
  EXPECT_EQ(
      detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::not_guaranteed}).index,
      0);
  EXPECT_EQ(detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::run_to_run}).index,
            1);
  EXPECT_EQ(detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::portable}).index,
            2);
}

TEST(Selection, SkipsVariantsThatCannotImplement) {
  auto a = info("a", Determinism::portable);
  auto b = info("b", Determinism::portable);
  std::vector<detail::Candidate> cs{cand(a, "needs int32 indices"), cand(b)};
  auto ch = detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::portable});
  EXPECT_EQ(ch.index, 1);
  EXPECT_THAT(ch.explain, HasSubstr("needs int32 indices"));
}

// Selection is a pure function: over a random sequence of calls (levels, which variants can take
// the arguments, a forced variant or none), every answer is what the rule gives (the first
// implementable variant at or above the level, the forced one only) and equals, explanation
// included, the answer to the same inputs earlier in the sequence, whatever came in between.
TEST(Selection, IsPureSameInputsSameChoice) {
  const VariantInfo vs[] = {
      info("a_atomic", Determinism::not_guaranteed), info("b_sorted", Determinism::run_to_run),
      info("c_portable", Determinism::portable), info("d_portable", Determinism::portable)};
  const Determinism levels[] = {Determinism::not_guaranteed, Determinism::run_to_run,
                                Determinism::portable};
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 g(seed);
  std::map<std::tuple<int, int, int>, detail::Choice> seen; // (level, cannot mask, forced)
  for (int call = 0; call < 600; ++call) {
    const int level = static_cast<int>(g() % 3), mask = static_cast<int>(g() % 16);
    const int forced = static_cast<int>(g() % 5) - 1; // -1: none
    std::vector<detail::Candidate> cs;
    for (int i = 0; i < 4; ++i)
      cs.push_back(cand(vs[i], (mask >> i) & 1 ? "cannot" : ""));
    const auto ch = detail::choose_variant("fake_op", DeviceType::cpu, cs, {levels[level]},
                                           forced < 0 ? "" : vs[forced].name);
    int want = -1;
    for (int i = 0; i < 4 && want < 0; ++i)
      if ((forced < 0 || forced == i) && !((mask >> i) & 1) &&
          satisfies(vs[i].level, levels[level]))
        want = i;
    ASSERT_EQ(ch.index, want) << "call " << call << " level " << level << " mask " << mask
                              << " forced " << forced << ": " << ch.explain;
    if (want >= 0) {
      EXPECT_THAT(ch.explain, HasSubstr(std::string("ran ") + vs[want].name));
    }
    const auto [it, fresh] = seen.emplace(std::tuple{level, mask, forced}, ch);
    if (!fresh) {
      EXPECT_EQ(ch.explain, it->second.explain) << "call " << call;
      EXPECT_EQ(ch.refused, it->second.refused) << "call " << call;
    }
  }
  EXPECT_GT(seen.size(), 100u); // the sequence repeated many inputs after others
}

TEST(Selection, RefusalNamesOpBackendLevelAndExistingLevels) {
  auto a = info("a_atomic", Determinism::not_guaranteed);
  std::vector<detail::Candidate> cs{cand(a)};
  auto ch = detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::portable});
  EXPECT_TRUE(ch.refused);
  EXPECT_EQ(ch.index, -1);
  EXPECT_THAT(ch.explain, HasSubstr("fake_op"));
  EXPECT_THAT(ch.explain, HasSubstr("cpu"));
  EXPECT_THAT(ch.explain, HasSubstr("portable"));
  EXPECT_THAT(ch.explain, HasSubstr("a_atomic (not_guaranteed)"));
}

// A variant that would meet the level but cannot take these arguments: the refusal says why, and
// does not pretend the level has no variant at all.
TEST(Selection, RefusalSaysWhyAQualifyingVariantCannotRun) {
  auto a = info("a_atomic", Determinism::not_guaranteed);
  auto b = info("b_sorted", Determinism::portable);
  std::vector<detail::Candidate> cs{cand(a), cand(b, "more than 2^31 - 1 sources")};
  auto ch = detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::portable});
  EXPECT_TRUE(ch.refused);
  EXPECT_EQ(ch.index, -1);
  EXPECT_THAT(ch.explain, HasSubstr("for these arguments"));
  EXPECT_THAT(ch.explain, HasSubstr("b_sorted cannot take them: more than 2^31 - 1 sources"));
  EXPECT_THAT(ch.explain, ::testing::Not(HasSubstr("a_atomic cannot")));
}

TEST(Selection, WarnOnlyRunsTheStrongestThereIs) {
  auto a = info("a", Determinism::not_guaranteed);
  auto b = info("b", Determinism::run_to_run);
  std::vector<detail::Candidate> cs{cand(a), cand(b)};
  auto ch = detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::portable, true});
  EXPECT_TRUE(ch.degraded);
  EXPECT_EQ(ch.index, 1);
}

TEST(Selection, OtherBackendVariantsDoNotCount) {
  auto a = info("a", Determinism::portable, DeviceType::cuda);
  std::vector<detail::Candidate> cs{cand(a)};
  auto ch = detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::not_guaranteed});
  EXPECT_EQ(ch.index, -1);
  EXPECT_TRUE(ch.unavailable) << "no variant on the backend at all: not a question of level";
  EXPECT_FALSE(ch.refused);
  EXPECT_THAT(ch.explain, HasSubstr("no cpu variant"));
}

TEST(Selection, ForcedVariantMustExistAndQualify) {
  auto a = info("a", Determinism::not_guaranteed);
  auto b = info("b", Determinism::portable);
  std::vector<detail::Candidate> cs{cand(a), cand(b)};
  EXPECT_EQ(
      detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::not_guaranteed}, "b")
          .index,
      1);
  EXPECT_TRUE(
      detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::portable}, "a").refused);
  auto missing =
      detail::choose_variant("fake_op", DeviceType::cpu, cs, {Determinism::not_guaranteed}, "zzz");
  EXPECT_EQ(missing.index, -1);
  EXPECT_THAT(missing.explain, HasSubstr("no cpu variant is named 'zzz'"));
}

TEST(Mode, PerCallBeatsGuardBeatsGlobal) {
  const Mode saved = mode();
  set_determinism(Determinism::portable);
  EXPECT_EQ(effective_mode({}).level, Determinism::portable);
  {
    DeterminismGuard g(Determinism::not_guaranteed);
    EXPECT_EQ(effective_mode({}).level, Determinism::not_guaranteed);
    {
      DeterminismGuard inner(Determinism::run_to_run);
      EXPECT_EQ(effective_mode({}).level, Determinism::run_to_run);
      EXPECT_EQ(effective_mode({.level = Determinism::portable}).level, Determinism::portable);
    }
    EXPECT_EQ(effective_mode({}).level, Determinism::not_guaranteed);
  }
  EXPECT_EQ(effective_mode({}).level, Determinism::portable);
  set_mode(saved);
}

TEST(Mode, GuardIsPerThread) {
  const Mode saved = mode();
  set_determinism(Determinism::run_to_run);
  DeterminismGuard g(Determinism::portable);
  Determinism seen = Determinism::portable;
  std::thread([&] { seen = effective_mode({}).level; }).join();
  EXPECT_EQ(seen, Determinism::run_to_run);
  set_mode(saved);
}

TEST(Mode, ParseAndPrintLevels) {
  for (auto l : {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable})
    EXPECT_EQ(parse_determinism(to_string(l)), l);
  EXPECT_THROW(parse_determinism("bitwise"), InvalidArgument);
  EXPECT_LT(Determinism::not_guaranteed, Determinism::run_to_run);
  EXPECT_LT(Determinism::run_to_run, Determinism::portable);
}

TEST(Registry, EveryOpHasCpuVariantsAtEveryLevel) {
  for (const auto& op : op_names())
    if (!op.starts_with("test_only"))
      for (auto l : {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable}) {
        EXPECT_TRUE(preview_selection(op, DeviceType::cpu, l).runs) << op << " at " << to_string(l);
      }
}

TEST(Registry, VariantNamesAreUniquePerOp) {
  auto vs = list_variants();
  for (std::size_t i = 0; i < vs.size(); ++i)
    for (std::size_t j = i + 1; j < vs.size(); ++j)
      EXPECT_FALSE(vs[i].op == vs[j].op && vs[i].name == vs[j].name)
          << vs[i].op << " " << vs[i].name;
}

TEST(Dispatch, ExplainSaysWhatRan) {
  Tensor x = testing::random_normal({100}, DType::f32, testing::fresh_seed());
  Tensor out = Tensor::empty({1}, DType::f32);
  sum(x, out, {.level = Determinism::portable});
  EXPECT_THAT(last_explain(), HasSubstr("ran cpu.canonical_tree (portable)"));
  sum(x, out, {.level = Determinism::not_guaranteed});
  EXPECT_THAT(last_explain(), HasSubstr("sum on cpu at not_guaranteed"));
}

TEST(Dispatch, ForcedVariantRuns) {
  Tensor x = testing::random_normal({100}, DType::f32, testing::fresh_seed());
  Tensor out = Tensor::empty({1}, DType::f32);
  sum(x, out, {.level = Determinism::not_guaranteed, .variant = "cpu.atomic_chunks"});
  EXPECT_THAT(last_explain(), HasSubstr("ran cpu.atomic_chunks"));
  // Forced below the level: the message says the variant asked for is the reason, and what
  // selection alone would run.
  try {
    sum(x, out, {.level = Determinism::portable, .variant = "cpu.atomic_chunks"});
    FAIL() << "expected NondeterministicError";
  } catch (const NondeterministicError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the variant asked for, cpu.atomic_chunks, guarantees only "
                                    "not_guaranteed. Drop Options::variant to let samebits choose "
                                    "(it would run cpu.canonical_tree)"));
  }
}

TEST(Dispatch, CudaTensorsWithoutCudaSayWhy) {
  if (cuda_available())
    GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(Tensor::empty({4}, DType::f32, Device::cuda()), Error);
}

} // namespace
} // namespace samebits

namespace samebits {
namespace {

// A test-only op with a single not_guaranteed variant, to exercise refusal and warn-only.
struct FakeArgs {
  int* counter;
};

void register_fake_op() {
  static std::once_flag once;
  std::call_once(once, [] {
    detail::registry().add(detail::Variant<FakeArgs>{
        {"test_only_atomic_op", "cpu.atomic", DeviceType::cpu, Determinism::not_guaranteed, "test"},
        nullptr,
        nullptr,
        [](const FakeArgs& a, const detail::Workspace&) { ++*a.counter; }});
  });
}

TEST(Dispatch, RefusesWithNondeterministicErrorNamingTheOp) {
  register_fake_op();
  int counter = 0;
  try {
    detail::dispatch("test_only_atomic_op", Device::cpu(), FakeArgs{&counter},
                     {.level = Determinism::run_to_run});
    FAIL() << "expected NondeterministicError";
  } catch (const NondeterministicError& e) {
    EXPECT_THAT(e.what(), HasSubstr("test_only_atomic_op on cpu at run_to_run"));
    EXPECT_THAT(e.what(), HasSubstr("cpu.atomic (not_guaranteed)"));
    EXPECT_EQ(last_explain(), e.what()) << "a refused call leaves its explanation behind";
  }
  EXPECT_EQ(counter, 0);
}

// An op without a variant on the tensors' backend is a BackendUnavailable (which warn-only mode
// does not get past either), not a NondeterministicError.
TEST(Dispatch, NoVariantOnTheBackendIsBackendUnavailable) {
  register_fake_op();
  int counter = 0;
  for (bool warn_only : {false, true}) {
    DeterminismGuard g(Determinism::not_guaranteed, warn_only);
    try {
      detail::dispatch("test_only_atomic_op", Device::cuda(), FakeArgs{&counter}, {});
      FAIL() << "expected BackendUnavailable";
    } catch (const BackendUnavailable& e) {
      EXPECT_THAT(e.what(), HasSubstr("op 'test_only_atomic_op' has no cuda variant"));
    }
  }
  EXPECT_EQ(counter, 0);
}

TEST(Dispatch, WarnOnlyWarnsOncePerOpAndRuns) {
  register_fake_op();
  reset_warnings();
  std::vector<std::string> warnings;
  set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  int counter = 0;
  {
    DeterminismGuard g(Determinism::portable, /*warn_only=*/true);
    for (int i = 0; i < 3; ++i)
      detail::dispatch("test_only_atomic_op", Device::cpu(), FakeArgs{&counter}, {});
  }
  set_warning_handler(nullptr);
  EXPECT_EQ(counter, 3);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("test_only_atomic_op"));
  EXPECT_THAT(warnings[0], HasSubstr("warn-only"));
}

} // namespace
} // namespace samebits

// Write-then-read-back properties of the two file formats samebits writes for later reading:
// random tolerance sets survive to_json / tolerances_from_json and save / load exactly, and random
// traces (every dtype, empty and strided tensors, NaN, infinities, -0.0, denormals, names with
// quotes, escapes and non-ASCII UTF-8) read back as what was recorded: the statistics the
// trace format documents, computed here independently. SAMEBITS_TEST_SEED replays a run.
#include "samebits/app/trace_diff.hpp"
#include "samebits/tolerance.hpp"
#include "samebits/trace.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <unistd.h>

namespace samebits {
namespace {

std::uint64_t seed_of_run() {
  if (const char* e = std::getenv("SAMEBITS_TEST_SEED"); e != nullptr && *e != '\0')
    return std::strtoull(e, nullptr, 10);
  return testing::fresh_seed();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("samebits_roundtrip_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// A random name: ASCII, JSON's special characters, control characters and multi-byte UTF-8.
std::string random_name(std::mt19937_64& g) {
  static const char* const pieces[] = {
      "a",     "Z",     "0",  ".",    "_",    " ",        "\"",           "\\",
      "/",     "\n",    "\t", "\x01", "\x7f", "\xc3\xa9", "\xe2\x88\x91", "\xf0\x9f\x98\x80",
      "conv1", "weight"};
  std::string s;
  const int n = std::uniform_int_distribution<int>(0, 12)(g);
  for (int i = 0; i < n; ++i)
    s += pieces[g() % std::size(pieces)];
  return s;
}

// A non-negative double of any scale: 0, denormals, 1, huge values, +inf, or random ones.
double random_tolerance(std::mt19937_64& g) {
  switch (g() % 8) {
  case 0:
    return 0.0;
  case 1:
    return std::numeric_limits<double>::denorm_min() * static_cast<double>(g() % 1000 + 1);
  case 2:
    return std::numeric_limits<double>::infinity();
  case 3:
    return std::numeric_limits<double>::max();
  default:
    return std::ldexp(std::uniform_real_distribution<double>(1, 2)(g),
                      std::uniform_int_distribution<int>(-1000, 1000)(g));
  }
}

TEST(RoundTrip, RandomTolerancesReadBackExactly) {
  const auto seed = seed_of_run();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: SAMEBITS_TEST_SEED)");
  std::mt19937_64 g(seed);
  const auto path = temp_path("tolerances.json");
  for (int trial = 0; trial < 200; ++trial) {
    Tolerances t;
    t.safety_factor =
        std::ldexp(std::uniform_real_distribution<double>(1, 2)(g), int(g() % 20) - 10);
    t.runs = static_cast<int>(g() % 100000);
    t.source = random_name(g);
    if (g() % 2)
      t.environment_json = "{\"host\":\"x\",\"threads\":" + std::to_string(g() % 64) + "}";
    const int tensors = static_cast<int>(g() % 6);
    for (int i = 0; i < tensors; ++i) {
      Tolerance tol{
          random_tolerance(g), random_tolerance(g), random_tolerance(g), random_tolerance(g), {}};
      const int nd = static_cast<int>(g() % 5);
      for (int d = 0; d < nd; ++d)
        tol.shape.push_back(static_cast<std::int64_t>(g() % (std::int64_t{1} << (g() % 40))));
      t.tensors[random_name(g) + std::to_string(i)] = tol;
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    const bool via_file = trial % 2 == 1;
    Tolerances back;
    if (via_file) {
      save_tolerances(t, path);
      back = load_tolerances(path);
    } else {
      back = tolerances_from_json(to_json(t));
    }
    EXPECT_EQ(back.safety_factor, t.safety_factor);
    EXPECT_EQ(back.runs, t.runs);
    EXPECT_EQ(back.source, t.source);
    EXPECT_EQ(back.environment_json.empty(), t.environment_json.empty());
    ASSERT_EQ(back.tensors.size(), t.tensors.size());
    for (const auto& [name, tol] : t.tensors) {
      ASSERT_EQ(back.tensors.count(name), 1u) << "name '" << name << "' did not come back";
      const Tolerance& b = back.tensors.at(name);
      EXPECT_EQ(b.abs, tol.abs);
      EXPECT_EQ(b.rel, tol.rel);
      EXPECT_EQ(b.max_abs_diff, tol.max_abs_diff);
      EXPECT_EQ(b.max_rel_diff, tol.max_rel_diff);
      EXPECT_EQ(b.shape, tol.shape);
    }
    EXPECT_EQ(to_json(back), to_json(t)); // and writing it again gives the same text
  }
  std::remove(path.c_str());
}

// Random values of `dtype`, with special values mixed in for floats.
Tensor special_values(const Shape& shape, DType dtype, std::mt19937_64& g) {
  Tensor t = testing::random_values(shape, dtype, g());
  if (!is_floating(dtype))
    return t;
  const double specials[] = {std::nan(""),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             -0.0,
                             5e-324,
                             1e-40};
  auto* p = static_cast<unsigned char*>(t.raw());
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (g() % 6 == 0) {
      const double v = specials[g() % std::size(specials)];
      if (dtype == DType::f32) {
        const float f = static_cast<float>(v);
        std::memcpy(p + i * 4, &f, 4);
      } else {
        std::memcpy(p + i * 8, &v, 8);
      }
    }
  return t;
}

bool same_number(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

TEST(RoundTrip, RandomTracesReadBackAsRecorded) {
  const auto seed = seed_of_run();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: SAMEBITS_TEST_SEED)");
  std::mt19937_64 g(seed);
  const auto path = temp_path("trace.jsonl");
  for (int trial = 0; trial < 10; ++trial) {
    struct Recorded {
      std::int64_t step;
      std::string layer, op, context;
      Tensor values; // contiguous, what the view held
    };
    std::vector<Recorded> rec;
    {
      trace::Session session(path);
      const int n = static_cast<int>(g() % 30);
      for (int i = 0; i < n; ++i) {
        const DType dt = static_cast<DType>(g() % 4);
        Shape s;
        const int nd = static_cast<int>(g() % 4);
        for (int d = 0; d < nd; ++d)
          s.push_back(static_cast<std::int64_t>(g() % 7));
        Tensor t = special_values(s, dt, g);
        TensorView v = t.view();
        if (nd >= 2 && g() % 2)
          v = v.transpose(0, nd - 1); // recorded by its logical (row-major) contents
        Recorded r{static_cast<std::int64_t>(g() % 1000) - 10, random_name(g), random_name(g),
                   g() % 3 == 0 ? random_name(g) : "", Tensor::copy_of(v)};
        std::optional<trace::Context> ctx;
        if (!r.context.empty())
          ctx.emplace(r.context);
        trace::record(r.step, r.layer, r.op, v);
        rec.push_back(std::move(r));
      }
    }
    const trace::TraceFile f = trace::read(path);
    ASSERT_EQ(f.entries.size(), rec.size()) << "trial " << trial;
    for (std::size_t i = 0; i < rec.size(); ++i) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " entry " + std::to_string(i));
      const trace::Entry& e = f.entries[i];
      const Recorded& r = rec[i];
      EXPECT_EQ(e.index, static_cast<std::int64_t>(i));
      EXPECT_EQ(e.step, r.step);
      EXPECT_EQ(e.layer, r.layer);
      EXPECT_EQ(e.op, r.op);
      EXPECT_EQ(e.context, r.context);
      EXPECT_EQ(e.dtype, std::string(to_string(r.values.dtype())));
      EXPECT_EQ(e.shape, r.values.sizes());
      EXPECT_EQ(e.hash, hash_hex(content_hash(r.values)));
      // The documented statistics, in float64, row-major.
      const auto v = testing::to_doubles(r.values);
      const auto n = static_cast<std::int64_t>(v.size());
      std::int64_t nans = 0;
      double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
      for (double x : v) {
        if (std::isnan(x)) {
          ++nans;
          continue;
        }
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        sum += x;
        sq += x * x;
      }
      EXPECT_EQ(e.nan_count, nans);
      if (n > 0) {
        EXPECT_TRUE(same_number(e.min, nans == n ? NAN : lo)) << e.min;
        EXPECT_TRUE(same_number(e.max, nans == n ? NAN : hi)) << e.max;
        EXPECT_TRUE(same_number(e.mean, nans > 0 ? NAN : sum / static_cast<double>(n))) << e.mean;
        EXPECT_TRUE(same_number(e.l2, nans > 0 ? NAN : std::sqrt(sq))) << e.l2;
      }
      const std::int64_t k = std::min<std::int64_t>(trace::kSamples, n);
      ASSERT_EQ(e.samples.size(), static_cast<std::size_t>(k));
      for (std::int64_t j = 0; j < k; ++j)
        EXPECT_TRUE(same_number(e.samples[static_cast<std::size_t>(j)],
                                v[static_cast<std::size_t>(j * n / k)]))
            << "sample " << j;
    }
    // A trace compared with itself shows no difference.
    EXPECT_TRUE(trace::diff(f, f).agree());
  }
  std::remove(path.c_str());
}

} // namespace
} // namespace samebits

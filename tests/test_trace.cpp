// The trace recorder: nothing written while disabled, one parseable line per record with the
// right statistics, thread-safe numbering, and reading back what was written.
#include "samebits/app/trace_diff.hpp"
#include "samebits/trace.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace samebits {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("samebits_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Trace, DisabledByDefaultAndRecordIsANoOp) {
  EXPECT_FALSE(trace::enabled());
  Tensor t = Tensor::full({3}, 1.0, DType::f32);
  trace::record(0, "layer", "op", t); // must not crash or write anywhere
  int evaluated = 0;
  SAMEBITS_TRACE(++evaluated, "layer", "op", t);
  EXPECT_EQ(evaluated, 0) << "SAMEBITS_TRACE evaluates its arguments only when enabled";
}

TEST(Trace, RecordsStatisticsAndReadsBack) {
  const auto path = temp_path("trace_stats.jsonl");
  const std::vector<float> v = {1.5f, -2.0f, 4.0f, 0.5f};
  Tensor a = Tensor::from_vector(v, {2, 2});
  Tensor b = Tensor::from_vector(std::vector<double>{1.0, std::nan(""), 3.0}, {3});
  Tensor empty = Tensor::empty({0, 4}, DType::f32);
  {
    trace::Session session(path);
    EXPECT_TRUE(trace::enabled());
    trace::record(7, "conv1", "aggregate", a);
    trace::record(8, "conv2", "linear", a.view().transpose(0, 1));
    SAMEBITS_TRACE(9, "loss", "nll", b);
    trace::record(9, "x", "empty", empty);
  }
  EXPECT_FALSE(trace::enabled());
  const auto t = trace::read(path);
  EXPECT_NE(t.header.find("\"environment\""), std::string::npos);
  ASSERT_EQ(t.entries.size(), 4u);
  const auto& e = t.entries[0];
  EXPECT_EQ(e.index, 0);
  EXPECT_EQ(e.step, 7);
  EXPECT_EQ(e.layer, "conv1");
  EXPECT_EQ(e.op, "aggregate");
  EXPECT_EQ(e.dtype, "float32");
  EXPECT_EQ(e.shape, (Shape{2, 2}));
  EXPECT_EQ(e.hash, hash_hex(content_hash(a)));
  EXPECT_EQ(e.min, -2.0);
  EXPECT_EQ(e.max, 4.0);
  EXPECT_EQ(e.mean, 1.0);
  EXPECT_DOUBLE_EQ(e.l2, std::sqrt(2.25 + 4.0 + 16.0 + 0.25));
  EXPECT_EQ(e.samples, (std::vector<double>{1.5, -2.0, 4.0, 0.5}));
  // A transposed (strided) view is recorded by its logical contents.
  EXPECT_EQ(t.entries[1].hash, hash_hex(content_hash(a.view().transpose(0, 1))));
  EXPECT_NE(t.entries[1].hash, e.hash);
  EXPECT_EQ(t.entries[1].samples, (std::vector<double>{1.5, 4.0, -2.0, 0.5}));
  // NaN: counted, and the mean says so; min/max over the rest.
  EXPECT_EQ(t.entries[2].nan_count, 1);
  EXPECT_TRUE(std::isnan(t.entries[2].mean));
  EXPECT_EQ(t.entries[2].min, 1.0);
  EXPECT_EQ(t.entries[2].max, 3.0);
  EXPECT_EQ(t.entries[3].shape, (Shape{0, 4}));
  EXPECT_TRUE(t.entries[3].samples.empty());
  std::remove(path.c_str());
}

TEST(Trace, ConcurrentRecordsAreNumberedWithoutGaps) {
  const auto path = temp_path("trace_threads.jsonl");
  Tensor a = testing::random_normal({100}, DType::f32, testing::fresh_seed());
  trace::start(path);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i)
        trace::record(i, "thread" + std::to_string(t), "op", a);
    });
  for (auto& th : threads)
    th.join();
  trace::stop();
  const auto tr = trace::read(path);
  ASSERT_EQ(tr.entries.size(), 200u);
  for (std::size_t i = 0; i < tr.entries.size(); ++i)
    EXPECT_EQ(tr.entries[i].index, (std::int64_t)i);
  std::remove(path.c_str());
}

TEST(Trace, AFailedRunLeavesTheEarlierTraceInPlace) {
  const auto path = temp_path("trace_failed_run.jsonl");
  const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  {
    trace::Session session(path);
    trace::record(0, "conv1", "aggregate", a);
    trace::record(1, "conv1", "aggregate", a);
  }
  ASSERT_EQ(trace::read(path).entries.size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  try {
    trace::Session session(path);
    trace::record(0, "conv1", "aggregate", a);
    throw std::runtime_error("the traced run failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(trace::enabled());
  EXPECT_EQ(trace::read(path).entries.size(), 2u) << "the earlier trace was replaced";
  EXPECT_EQ(trace::read(path + ".partial").entries.size(), 1u) << "what the failed run recorded";
  std::filesystem::remove(path + ".partial");
}

TEST(Trace, StartTwiceAndBadPathsAreErrors) {
  const auto path = temp_path("trace_twice.jsonl");
  trace::start(path);
  EXPECT_THROW(trace::start(path), Error);
  trace::stop();
  trace::stop(); // harmless
  EXPECT_THROW(trace::start("/nonexistent-dir/x/trace.jsonl"), Error);
  EXPECT_FALSE(trace::enabled());
  EXPECT_THROW(trace::read("/nonexistent-dir/x/trace.jsonl"), DataError);
  // A file that trace::read refuses, with `expected` in its message.
  auto expect_refused = [&](const std::string& text, const std::string& expected) {
    std::ofstream(path) << text;
    try {
      trace::read(path);
      ADD_FAILURE() << "expected DataError for " << text;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  expect_refused("{\"samebits_trace\":1}\n{\"i\":0,\"step\":1}\n", ":2:"); // an entry cut short
  expect_refused("{\"samebits_trace\":99}\n", "trace format 99");
  std::remove(path.c_str());
}

// A binary file given as a trace: the message quotes a short excerpt, every byte printable.
TEST(Trace, BinaryLinesAreQuotedEscapedAndShort) {
  const auto path = temp_path("trace_binary.jsonl");
  std::ofstream(path) << "{\"samebits_trace\":1}\n"
                      << std::string("\xff\xfe\x1b[2J\x00", 7) << std::string(1000, 'z') << "\n";
  try {
    trace::read(path);
    ADD_FAILURE() << "expected DataError";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(":2: not a JSON line (error at byte 1): '\\xff\\xfe\\x1b[2J\\x00zzz"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("... (1007 bytes)"), std::string::npos) << m;
    EXPECT_TRUE(testing::all_printable(m)) << m;
    EXPECT_LT(m.size(), 300u + path.size()) << m;
  }
  std::remove(path.c_str());
}

} // namespace
} // namespace samebits

namespace samebits {
namespace {

trace::Entry entry(std::int64_t i, std::int64_t step, const std::string& op, double scale,
                   const std::string& hash) {
  trace::Entry e;
  e.index = i;
  e.step = step;
  e.layer = "l";
  e.op = op;
  e.dtype = "float32";
  e.shape = {4};
  e.hash = hash;
  e.min = -scale;
  e.max = scale;
  e.mean = 0.25 * scale;
  e.l2 = 2 * scale;
  e.samples = {scale, -scale, 0.5 * scale, 0.1};
  return e;
}

TEST(TraceDiff, IdenticalTracesReportNoDifference) {
  trace::TraceFile a;
  for (int i = 0; i < 10; ++i)
    a.entries.push_back(entry(i, i / 3, "op", 1.0 + i, std::string("h").append(std::to_string(i))));
  const auto r = trace::diff(a, a);
  EXPECT_EQ(r.first_diff, -1);
  EXPECT_EQ(r.structure_mismatch, -1);
  EXPECT_EQ(r.compared, 10);
  EXPECT_NE(trace::format_diff(r).find("no difference"), std::string::npos);
  EXPECT_NE(trace::diff_svg(r).find("</svg>"), std::string::npos);
}

TEST(TraceDiff, FindsFirstDifferenceAndGrowth) {
  trace::TraceFile a, b;
  for (int i = 0; i < 12; ++i) {
    a.entries.push_back(entry(i, i / 4, i == 5 ? "aggregate" : "linear", 1.0,
                              std::string("h").append(std::to_string(i))));
    // From entry 5 on, B drifts by a growing relative amount.
    const double drift = i < 5 ? 0.0 : 1e-7 * std::pow(10.0, i - 5);
    b.entries.push_back(
        entry(i, i / 4, i == 5 ? "aggregate" : "linear", 1.0 + drift,
              i < 5 ? std::string("h").append(std::to_string(i)) : "x" + std::to_string(i)));
  }
  const auto r = trace::diff(a, b);
  EXPECT_EQ(r.first_diff, 5);
  EXPECT_EQ(r.first_a.op, "aggregate");
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[0].differing, 0);
  EXPECT_EQ(r.steps[1].differing, 3);
  EXPECT_EQ(r.steps[2].differing, 4);
  EXPECT_NEAR(r.entries[5].distance, 1e-7, 1e-9);
  EXPECT_GT(r.steps[2].max_distance, r.steps[1].max_distance);
  const auto text = trace::format_diff(r);
  EXPECT_NE(text.find("first difference: entry 5, step 1"), std::string::npos) << text;
  const auto svg = trace::diff_svg(r);
  EXPECT_NE(svg.find("first difference: entry 5"), std::string::npos);
}

TEST(TraceDiff, ReportsStructuralMismatch) {
  trace::TraceFile a, b;
  for (int i = 0; i < 4; ++i) {
    a.entries.push_back(entry(i, 0, "op", 1.0, "h"));
    b.entries.push_back(entry(i, 0, i == 2 ? "other" : "op", 1.0, "h"));
  }
  const auto r = trace::diff(a, b);
  EXPECT_EQ(r.structure_mismatch, 2);
  EXPECT_EQ(r.compared, 2);
  EXPECT_NE(trace::format_diff(r).find("STRUCTURE DIFFERS"), std::string::npos);
  EXPECT_EQ(trace::format_diff(r).find("no difference"), std::string::npos);
  b.entries.resize(2); // a trace that stops early: the common entries agree, the traces do not
  const auto shorter = trace::diff(a, b);
  EXPECT_EQ(shorter.first_diff, -1);
  EXPECT_NE(trace::format_diff(shorter).find("one trace is longer"), std::string::npos);
  EXPECT_EQ(trace::format_diff(shorter).find("no difference"), std::string::npos);
}

TEST(TraceDiff, DifferentBitsWithEqualStatisticsStillCount) {
  trace::TraceFile a, b;
  a.entries.push_back(entry(0, 0, "op", 1.0, "h1"));
  b.entries.push_back(entry(0, 0, "op", 1.0, "h2"));
  const auto r = trace::diff(a, b);
  EXPECT_EQ(r.first_diff, 0);
  EXPECT_GT(r.entries[0].distance, 0.0);
}

TEST(Trace, ContextsLabelTheirThreadsEntriesAndNest) {
  const auto path = temp_path("trace_context.jsonl");
  Tensor t = Tensor::full({2}, 1.0, DType::f32);
  EXPECT_EQ(trace::current_context(), "");
  {
    trace::Session session(path);
    trace::record(0, "l", "outside", t);
    {
      trace::Context run("cuda portable repeat run 2 of 3, seed 7");
      trace::record(0, "l", "run", t);
      {
        trace::Context inner("inner");
        trace::record(0, "l", "inner", t);
        // Another thread has its own (empty) context.
        std::thread([&] { trace::record(0, "l", "other thread", t); }).join();
      }
      EXPECT_EQ(trace::current_context(), "cuda portable repeat run 2 of 3, seed 7");
      trace::record(1, "l", "run again", t);
    }
    EXPECT_EQ(trace::current_context(), "");
    trace::record(1, "l", "after", t);
  }
  const auto entries = trace::read(path).entries;
  ASSERT_EQ(entries.size(), 6u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"outside", ""},
      {"run", "cuda portable repeat run 2 of 3, seed 7"},
      {"inner", "inner"},
      {"other thread", ""},
      {"run again", "cuda portable repeat run 2 of 3, seed 7"},
      {"after", ""}};
  for (std::size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].op, expected[i].first);
    EXPECT_EQ(entries[i].context, expected[i].second) << entries[i].op;
  }
  // An entry outside any context has no "context" key at all (traces stay as before).
  std::ifstream in(path);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  EXPECT_EQ(first.find("context"), std::string::npos) << first;
  std::remove(path.c_str());
}

TEST(TraceDiff, ContextsAreShownNotCompared) {
  trace::TraceFile a, b;
  for (int run = 1; run <= 2; ++run)
    for (int step = 0; step < 2; ++step) {
      const int i = static_cast<int>(a.entries.size());
      auto x = entry(i, step, "aggregate", 1.0, std::string("h").append(std::to_string(i)));
      auto y = x;
      x.context = "cpu portable run " + std::to_string(run);
      y.context = "cuda portable run " + std::to_string(run);
      if (run == 2 && step == 1) {
        y.hash = "different";
        y.mean += 1e-6;
      }
      a.entries.push_back(x);
      b.entries.push_back(y);
    }
  const auto r = trace::diff(a, b);
  EXPECT_EQ(r.structure_mismatch, -1) << "labels differ between devices; the ops do not";
  EXPECT_EQ(r.first_diff, 3);
  // One growth row per (run, step), not per step.
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(r.steps[3].context, "cpu portable run 2");
  EXPECT_EQ(r.steps[3].differing, 1);
  EXPECT_EQ(r.steps[1].differing, 0);
  const auto text = trace::format_diff(r);
  EXPECT_NE(text.find("context  A: cpu portable run 2"), std::string::npos) << text;
  EXPECT_NE(text.find("B: cuda portable run 2"), std::string::npos) << text;
  EXPECT_NE(text.find("context (A)"), std::string::npos) << text;
  b.entries[3].hash = a.entries[3].hash;
  EXPECT_TRUE(trace::diff(a, b).agree());
}

TEST(TraceDiff, NamesFromTheFileAreEscapedForTerminalAndSvg) {
  trace::TraceFile a, b;
  auto x = entry(0, 0, "op\x1b[31m<b>&", 1.0, "h1");
  x.layer = "layer\n<script>";
  x.context = "run\x07 1";
  auto y = x;
  y.hash = "h2";
  a.entries.push_back(x);
  b.entries.push_back(y);
  const auto r = trace::diff(a, b);
  const auto text = trace::format_diff(r);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(testing::all_printable(line)) << line;
  EXPECT_NE(text.find("layer\\n<script>"), std::string::npos) << text;
  const auto svg = trace::diff_svg(r);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;"), std::string::npos) << svg;
}

} // namespace
} // namespace samebits

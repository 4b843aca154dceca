// The sum64 trace hash and traces written from Python: known values (the same constants are
// checked by python/tests/test_trace.py against samebits.torch._sumhash's device code), the
// recorder writing it, and diff comparing Python-style, C++ and old traces by the hash kinds they
// share.
#include "samebits/app/trace_diff.hpp"
#include "samebits/trace.hpp"
#include "testing.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace samebits {
namespace {

constexpr std::int64_t kN = 5000; // float32: 2 kN values, 5000 words, more than a row of 4096

// The tensors of python/tests/test_trace.py's test_sum_hash_matches_the_cpp_constants.
Tensor known(DType dt) {
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;
  for (std::int64_t i = 0; i < 2 * kN; ++i)
    f32.push_back(static_cast<float>((i * 37) % 1001 - 500) / 64.0f);
  for (std::int64_t i = 0; i < kN; ++i) {
    f64.push_back(static_cast<double>((i * 53) % 2001 - 1000) / 1024.0);
    i32.push_back(static_cast<std::int32_t>((i * 7919) % 100003 - 50000));
    i64.push_back(i * i * 7919 - 3000000000LL);
  }
  switch (dt) {
  case DType::f32:
    return Tensor::from_vector(f32, {2 * kN});
  case DType::f64:
    return Tensor::from_vector(f64, {50, 100});
  case DType::i32:
    return Tensor::from_vector(i32, {kN});
  case DType::i64:
    return Tensor::from_vector(i64, {kN});
  case DType::bf16:
  case DType::f16:
    break; // the known values are of the four 32/64-bit dtypes
  }
  return {};
}

TEST(TraceSumHash, KnownValuesMatchThePythonSide) {
  EXPECT_EQ(hash_hex(trace::sum_hash(known(DType::f32))), "2737283b20127cc0");
  EXPECT_EQ(hash_hex(trace::sum_hash(known(DType::f64))), "a244966fba26fcc0");
  EXPECT_EQ(hash_hex(trace::sum_hash(known(DType::i32))), "29b2e7b9a0d92e0a");
  EXPECT_EQ(hash_hex(trace::sum_hash(known(DType::i64))), "c3ef43f9fcc8395e");
  // An odd number of float32 values: the last word is padded with zero bytes.
  const Tensor f32 = known(DType::f32);
  const std::vector<float> odd(static_cast<const float*>(f32.raw()),
                               static_cast<const float*>(f32.raw()) + 4097);
  EXPECT_EQ(hash_hex(trace::sum_hash(Tensor::from_vector(odd, {4097}))), "576eaf781d18da49");
}

TEST(TraceSumHash, AnyOneElementChangeChangesIt) {
  Tensor t = known(DType::f32);
  const auto h = trace::sum_hash(t);
  float* p = static_cast<float*>(t.raw());
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{4095}, std::int64_t{4096}, kN - 1}) {
    const float old = p[i];
    p[i] = std::nextafter(old, 1e9f); // the smallest change there is
    EXPECT_NE(trace::sum_hash(t), h) << "element " << i;
    p[i] = old;
  }
  EXPECT_EQ(trace::sum_hash(t), h);
  // Strided views hash by their logical (row-major) contents.
  Tensor m = known(DType::f64);
  EXPECT_NE(trace::sum_hash(m.view().transpose(0, 1)), trace::sum_hash(m));
  EXPECT_EQ(trace::sum_hash(Tensor::copy_of(m.view().transpose(0, 1), Device::cpu())),
            trace::sum_hash(m.view().transpose(0, 1)));
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("samebits_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(TraceSumHash, RecordedAndComparedAgainstAPythonStyleTrace) {
  const auto path = temp_path("trace_sum_hash.jsonl");
  {
    trace::Session session(path);
    trace::record(0, "layer", "op", known(DType::f32));
  }
  const auto cpp = trace::read(path);
  ASSERT_EQ(cpp.entries.size(), 1u);
  EXPECT_EQ(cpp.entries[0].sum_hash, "2737283b20127cc0");
  EXPECT_FALSE(cpp.entries[0].hash.empty());

  // A Python trace's line: sum_hash only, with the source fields.
  const auto py_path = temp_path("trace_sum_hash_py.jsonl");
  {
    std::ofstream f(py_path);
    f << R"({"samebits_trace":1,"version":"python","git":"","environment":{}})"
      << "\n"
      << R"({"i":0,"step":0,"layer":"layer","op":"op","dtype":"float32","shape":[10000],)"
      << R"("source":"model.py:12","grad_fn":"MmBackward0","sum_hash":"2737283b20127cc0",)"
      << R"("min":-7.8125,"max":7.8125,"mean":0,"l2":1,"nan":0,"samples":[]})"
      << "\n";
  }
  auto py = trace::read(py_path);
  ASSERT_EQ(py.entries.size(), 1u);
  EXPECT_TRUE(py.entries[0].hash.empty());
  EXPECT_EQ(py.entries[0].source, "model.py:12");
  EXPECT_EQ(py.entries[0].grad_fn, "MmBackward0");
  EXPECT_TRUE(trace::diff(cpp, py).agree()) << trace::format_diff(trace::diff(cpp, py));

  py.entries[0].sum_hash = "0000000000000001";
  const auto r = trace::diff(py, cpp);
  EXPECT_EQ(r.first_diff, 0);
  const auto text = trace::format_diff(r);
  EXPECT_NE(text.find("source   A: model.py:12"), std::string::npos) << text;
  EXPECT_NE(text.find("backward of MmBackward0"), std::string::npos) << text;

  // An old C++ trace (hash only) and a Python trace share no hash kind: said, not "agree".
  auto old = cpp;
  old.entries[0].sum_hash.clear();
  const auto none = trace::diff(old, py);
  EXPECT_FALSE(none.agree());
  EXPECT_NE(trace::format_diff(none).find("no common kind"), std::string::npos);
  // Two old traces still compare by their XXH3 hash.
  EXPECT_TRUE(trace::diff(old, old).agree());
  std::remove(path.c_str());
  std::remove(py_path.c_str());
}

} // namespace
} // namespace samebits

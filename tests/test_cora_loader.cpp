// The TSV graph loader: the shipped Cora files pass every check of their README; broken files
// written to a temporary directory give DataError messages that name the file, line and fault.
#include "samebits/app/cora.hpp"
#include "samebits/errors.hpp"
#include "testing.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <numeric>
#include <string>

namespace samebits::nn {
namespace {

namespace fs = std::filesystem;

class TempData : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("samebits_cora_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  // A small valid graph: 4 nodes, node 3 has no edges and no features.
  void write_good() {
    write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n"
                       "0\t1\ttrain\t0,2\n"
                       "1\t0\tval\t1\n"
                       "2\t2\ttest\t0,1,4\n"
                       "3\t1\tnone\t\n");
    write("edges.tsv", "src\tdst\n0\t1\n1\t0\n2\t1\n1\t2\n");
  }
  std::string error_of(const LoadOptions& opts = {}) {
    return testing::caught<DataError>([&] { load_dataset(dir_, opts); }).value_or("no error");
  }
  fs::path dir_;
};

TEST(CoraLoader, ShippedCoraPassesItsChecks) {
  const Dataset d = load_dataset("data/cora", {.expect = cora_expected()});
  EXPECT_EQ(d.num_nodes, 2708);
  EXPECT_EQ(d.num_features, 1433);
  EXPECT_EQ(d.num_classes, 7);
  EXPECT_EQ(d.num_edges(), 10556);
  EXPECT_TRUE(d.binary_features);
  EXPECT_TRUE(d.features.values.empty());
  EXPECT_EQ(d.nodes_in(Split::train).size(), 140u);
  EXPECT_EQ(d.nodes_in(Split::val).size(), 500u);
  EXPECT_EQ(d.nodes_in(Split::test).size(), 1000u);
  EXPECT_EQ(d.nodes_in(Split::none).size(), 1068u);
  const Csr nb = d.in_neighbours();
  EXPECT_EQ(nb.nnz(), 10556);
  // Symmetric graph: node 0's in-neighbours are its out-neighbours, 633 among them, ascending.
  const std::vector<std::int32_t> n0(nb.cols.begin() + nb.offsets[0],
                                     nb.cols.begin() + nb.offsets[1]);
  EXPECT_TRUE(std::is_sorted(n0.begin(), n0.end()));
  EXPECT_NE(std::find(n0.begin(), n0.end(), 633), n0.end());
}

TEST_F(TempData, SmallGraphReadsBackExactly) {
  write_good();
  const Dataset d = load_dataset(dir_);
  EXPECT_EQ(d.num_nodes, 4);
  EXPECT_EQ(d.num_features, 5);
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_EQ(d.features.offsets, (std::vector<std::int64_t>{0, 2, 3, 6, 6}));
  EXPECT_EQ(d.features.cols, (std::vector<std::int32_t>{0, 2, 1, 0, 1, 4}));
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{1, 0, 2, 1}));
  EXPECT_EQ(d.split, (std::vector<Split>{Split::train, Split::val, Split::test, Split::none}));
  const Csr nb = d.in_neighbours();
  // in-neighbours: 0 <- 1; 1 <- 0, 2; 2 <- 1; 3 <- none.
  EXPECT_EQ(nb.offsets, (std::vector<std::int64_t>{0, 1, 3, 4, 4}));
  EXPECT_EQ(nb.cols, (std::vector<std::int32_t>{1, 0, 2, 1}));
  const Csr ft = transpose(d.features);
  EXPECT_EQ(ft.rows, 5);
  EXPECT_EQ(ft.offsets, (std::vector<std::int64_t>{0, 2, 4, 5, 5, 6}));
  EXPECT_EQ(ft.cols, (std::vector<std::int32_t>{0, 2, 1, 2, 0, 2}));
}

TEST_F(TempData, IndexValueFeaturesAndFixedWidth) {
  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\t0\ttrain\t3:0.25,1:1.5\n1\t1\ttest\t2\n");
  write("edges.tsv", "src\tdst\n");
  const Dataset d = load_dataset(dir_, {.num_features = 10});
  EXPECT_FALSE(d.binary_features);
  EXPECT_EQ(d.num_features, 10);
  EXPECT_EQ(d.features.values, (std::vector<float>{0.25f, 1.5f, 1.0f}));
  EXPECT_EQ(d.num_edges(), 0);
  EXPECT_EQ(d.in_neighbours().offsets, (std::vector<std::int64_t>{0, 0, 0}));
  const Csr ft = transpose(d.features);
  EXPECT_EQ(ft.values, (std::vector<float>{1.5f, 1.0f, 0.25f}));
}

TEST_F(TempData, WindowsLineEndingsAreAccepted) {
  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\r\n0\t0\ttrain\t1\r\n1\t1\tval\t0\r\n");
  write("edges.tsv", "src\tdst\r\n0\t1\r\n");
  EXPECT_EQ(load_dataset(dir_).num_edges(), 1);
}

TEST_F(TempData, MissingFile) {
  write_good();
  fs::remove(dir_ / "edges.tsv");
  EXPECT_NE(error_of().find("cannot open"), std::string::npos) << error_of();
  EXPECT_NE(error_of().find("edges.tsv"), std::string::npos);
  fs::remove_all(dir_);
  EXPECT_NE(error_of().find("nodes.tsv"), std::string::npos);
}

TEST_F(TempData, BadLine) {
  write_good();
  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\t1\ttrain\t0\n1\t0 val 1\n");
  const std::string e = error_of();
  EXPECT_NE(e.find("nodes.tsv line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("4 tab-separated fields"), std::string::npos) << e;

  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\tx\ttrain\t0\n");
  EXPECT_NE(error_of().find("label 'x' is not a number"), std::string::npos) << error_of();

  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\t1\ttrain\t0,,2\n");
  EXPECT_NE(error_of().find("feature index '' is not a number"), std::string::npos) << error_of();

  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\t1\ttrain\t0:abc\n");
  EXPECT_NE(error_of().find("feature value 'abc'"), std::string::npos) << error_of();

  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n1\t1\ttrain\t0\n");
  EXPECT_NE(error_of().find("out of order"), std::string::npos) << error_of();

  write("nodes.tsv", "id\tlabel\tsplit\tfeatures\n0\t1\ttrain\t0\n");
  EXPECT_NE(error_of().find("bad header"), std::string::npos) << error_of();

  write_good();
  write("edges.tsv", "src\tdst\n0\t1\n0\n");
  EXPECT_NE(error_of().find("edges.tsv line 3: expected 2"), std::string::npos) << error_of();
}

TEST_F(TempData, UnknownSplit) {
  write_good();
  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\t1\ttrain\t0\n1\t0\ttrian\t1\n");
  const std::string e = error_of();
  EXPECT_NE(e.find("line 3: unknown split 'trian'"), std::string::npos) << e;
}

// A message quotes at most a short excerpt of the file, every byte of it printable.
TEST_F(TempData, BinaryBytesAreQuotedEscapedAndShort) {
  const auto printable = testing::all_printable;
  // A compressed file given for nodes.tsv: NUL, high bytes, control characters, no newline.
  std::string gz("\x1f\x8b\x08\x00\xff\xfe\r\x07", 8);
  for (int i = 0; i < 4096; ++i)
    gz += static_cast<char>(i * 37 % 256 == '\n' ? 0 : i * 37 % 256);
  write_good();
  write("nodes.tsv", gz);
  std::string e = error_of();
  EXPECT_NE(e.find("bad header '\\x1f\\x8b\\x08\\x00\\xff\\xfe\\r\\x07"), std::string::npos) << e;
  EXPECT_NE(e.find("... (4104 bytes)"), std::string::npos) << e;
  EXPECT_TRUE(printable(e)) << e;
  EXPECT_LT(e.size(), 400u + dir_.string().size()) << e;

  write("nodes.tsv",
        "node\tlabel\tsplit\tfeatures\n0\t1\t" + std::string("\xff\x00tr\x1b[2J", 8) + "\t0\n");
  e = error_of();
  EXPECT_NE(e.find("unknown split '\\xff\\x00tr\\x1b[2J'"), std::string::npos) << e;
  EXPECT_TRUE(printable(e)) << e;

  write("nodes.tsv",
        "node\tlabel\tsplit\tfeatures\n0\t" + std::string(100000, '7') + "x\ttrain\t0\n");
  e = error_of();
  EXPECT_NE(e.find("label '777"), std::string::npos) << e;
  EXPECT_NE(e.find("... (100001 bytes)"), std::string::npos) << e;
  EXPECT_LT(e.size(), 400u + dir_.string().size());

  write_good();
  write("edges.tsv", std::string("\x89PNG\r\n\x1a\n", 8));
  e = error_of();
  EXPECT_NE(e.find("edges.tsv line 1: bad header '\\x89PNG'"), std::string::npos) << e;
  EXPECT_TRUE(printable(e)) << e;
}

TEST_F(TempData, IndexOutOfRange) {
  write_good();
  write("edges.tsv", "src\tdst\n0\t1\n1\t4\n");
  std::string e = error_of();
  EXPECT_NE(e.find("edges.tsv line 3: node 4 out of range [0, 4)"), std::string::npos) << e;

  write("edges.tsv", "src\tdst\n-1\t1\n");
  EXPECT_NE(error_of().find("node -1 out of range"), std::string::npos) << error_of();

  write_good();
  e = error_of({.num_features = 4});
  EXPECT_NE(e.find("nodes.tsv line 4: feature index 4 out of range [0, 4)"), std::string::npos)
      << e;

  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\t1\ttrain\t-3\n");
  EXPECT_NE(error_of().find("feature index -3 out of range"), std::string::npos) << error_of();

  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n0\t-1\ttrain\t0\n");
  EXPECT_NE(error_of().find("label -1 is negative"), std::string::npos) << error_of();
}

// Values that would make the model ask for absurd memory, or poison every weight, are refused
// with their line; numbers too large for their type are "out of range", not "not a number".
TEST_F(TempData, HugeAndNonFiniteValues) {
  write_good();
  const std::string header = "node\tlabel\tsplit\tfeatures\n";
  write("nodes.tsv", header + "0\t1\ttrain\t0\n1\t65536\ttrain\t0\n");
  std::string e = error_of();
  EXPECT_NE(e.find("nodes.tsv line 3: label 65536 is above 65535 (at most 65536 classes)"),
            std::string::npos)
      << e;
  write("nodes.tsv", header + "0\t65535\ttrain\t16777215\n"); // both limits themselves: fine
  write("edges.tsv", "src\tdst\n0\t0\n");
  EXPECT_EQ(error_of(), "no error");
  write("nodes.tsv", header + "0\t1\ttrain\t16777216\n");
  e = error_of();
  EXPECT_NE(e.find("feature index 16777216 out of range [0, 16777216)"), std::string::npos) << e;
  write("nodes.tsv", header + "0\t3000000000000000000000\ttrain\t0\n");
  e = error_of();
  EXPECT_NE(e.find("label '3000000000000000000000' is out of range for a 64-bit integer"),
            std::string::npos)
      << e;
  write("nodes.tsv", header + "0\t1\ttrain\t0:1e50\n");
  e = error_of();
  EXPECT_NE(e.find("feature value '1e50' is out of range for a float32"), std::string::npos) << e;
  for (const char* v : {"nan", "inf", "-inf", "NaN", "infinity"}) {
    write("nodes.tsv", header + "0\t1\ttrain\t0:" + v + "\n");
    e = error_of();
    EXPECT_NE(e.find(std::string("nodes.tsv line 2: feature value '") + v + "' is not finite"),
              std::string::npos)
        << e;
  }
}

TEST_F(TempData, ExpectedCountsAreChecked) {
  write_good();
  const std::string e = error_of({.expect = cora_expected()});
  EXPECT_NE(e.find("the number of nodes is 4, expected 2708"), std::string::npos) << e;
  Expected ok{4, 4, 6, {1, 2, 1}};
  EXPECT_NO_THROW(load_dataset(dir_, {.expect = ok}));
  ok.class_counts = {2, 1, 1};
  EXPECT_NE(error_of({.expect = ok}).find("class counts"), std::string::npos);
}

TEST_F(TempData, EmptyFiles) {
  write("nodes.tsv", "");
  write("edges.tsv", "src\tdst\n");
  EXPECT_NE(error_of().find("empty file"), std::string::npos) << error_of();
  write("nodes.tsv", "node\tlabel\tsplit\tfeatures\n");
  EXPECT_NE(error_of().find("no nodes"), std::string::npos) << error_of();
}

} // namespace
} // namespace samebits::nn

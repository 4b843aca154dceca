// CUDA ops on inputs of more than 2^31 elements, positions, rows or sources. Each op family has
// one defined behaviour there: it computes the right result (positions, offsets and indices stay
// 64-bit from validation through the kernels), or it refuses with a samebits exception that names
// the op and the limit, having written nothing. Most inputs are stride-0 views (one stored row
// seen 2^31 + 8 times: no large allocation) holding values whose sums are exact in every order, so
// every level, atomic ones included, has one right answer. Kernels that read contiguous memory
// (16-byte loads, row copies, scans, histograms) read a real float32 tensor of 2^31 + 8 zeros
// (8.6 GB) with a few non-zero values on both sides of 2^31, so that a position truncated to 32
// bits reads or misses one of them. Those tests, and the whole-tensor sum (a 17 GB gathered copy),
// need about 30 GB of device memory and skip on smaller GPUs; the host needs 9 GB.
#include "ops/indexing_choice.hpp"
#include "ops/segment.hpp"
#include "ops/segment_choice.hpp"
#include "testing.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <optional>
#include <string>
#include <vector>

namespace samebits {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr Determinism kNg = Determinism::not_guaranteed;
constexpr Determinism kR2r = Determinism::run_to_run;
constexpr Determinism kPo = Determinism::portable;
const Device kGpu = Device::cuda();

constexpr std::int64_t kTwo31 = std::int64_t{1} << 31;
constexpr std::int64_t kTwo32 = std::int64_t{1} << 32;
constexpr std::int64_t kBig = kTwo31 + 8; // 2^31 + 8 = 8 * (2^28 + 1)

// Device memory the tests with real 2^31-element buffers need (both at once, with the allocator's
// rounding): GPUs with less skip them.
constexpr std::size_t kLargeTestBytes = std::size_t{32} << 30;
bool device_memory_at_least(std::size_t bytes) {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return total >= bytes;
}
#define REQUIRE_LARGE_DEVICE_MEMORY()                                                              \
  do {                                                                                             \
    SAMEBITS_REQUIRE_CUDA();                                                                       \
    if (!device_memory_at_least(kLargeTestBytes))                                                  \
      GTEST_SKIP() << "needs 32 GiB of GPU memory";                                                \
  } while (0)

// `rows` copies of the one row `row` holds (shape [1, ...], any device): every row of the view
// aliases it (stride 0 along dim 0).
TensorView repeated_row(const Tensor& row, std::int64_t rows) {
  TensorView v = row.view();
  v.shape[0] = rows;
  v.strides[0] = 0;
  return v;
}

// Empty when `got` (a small tensor on any device) holds exactly `want`, bit for bit (want's values
// are representable in got's dtype; +0.0 and -0.0 differ); else where the first difference is.
std::string mismatch(const TensorView& got, const std::vector<double>& want) {
  const std::vector<double> g = testing::to_doubles(got);
  if (g.size() != want.size())
    return std::to_string(g.size()) + " values, expected " + std::to_string(want.size());
  for (std::size_t i = 0; i < g.size(); ++i)
    if (std::bit_cast<std::uint64_t>(g[i]) != std::bit_cast<std::uint64_t>(want[i]))
      return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", expected " +
             std::to_string(want[i]);
  return "";
}

// The message of the exception of type E that `f` throws (a test failure, and "", when it throws
// nothing; another exception fails the test as it propagates).
template <class E, class F> std::string thrown(F&& f) {
  const std::optional<std::string> m = testing::caught<E>(f);
  if (!m)
    ADD_FAILURE() << "threw nothing";
  return m.value_or("");
}

// --- indexing ---------------------------------------------------------------------------------

// index_select and gather address rows past 2^31 of a dim of 2^31 + 8 rows; an index one past the
// end, or 2^32 (0 once truncated to 32 bits), is rejected with nothing written.
TEST(LargeGpu, IndexSelectAndGatherReachRowsPastTwoToThe31) {
  SAMEBITS_REQUIRE_CUDA();
  const Tensor row = Tensor::from_vector(std::vector<double>{1.5, -2.25}, {1, 2}, kGpu);
  const TensorView x = repeated_row(row, kBig);
  for (auto level : {kNg, kPo}) {
    SCOPED_TRACE(std::string(to_string(level)));
    Tensor index = Tensor::from_vector(std::vector<std::int64_t>{kBig - 1, 0, kTwo31}, {3}, kGpu);
    Tensor out = Tensor::full({3, 2}, 7.0, DType::f64, kGpu);
    index_select(x, 0, index, out, {.level = level});
    EXPECT_EQ(mismatch(out, {1.5, -2.25, 1.5, -2.25, 1.5, -2.25}), "");
    for (std::int64_t bad_value : {kBig, kTwo32}) {
      Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{0, bad_value}, {2}, kGpu);
      Tensor out2 = Tensor::full({2, 2}, 7.0, DType::f64, kGpu);
      const std::string m =
          thrown<IndexOutOfRange>([&] { index_select(x, 0, bad, out2, {.level = level}); });
      EXPECT_THAT(m, AllOf(HasSubstr("index_select"), HasSubstr("position 1"),
                           HasSubstr(std::to_string(kBig))));
      EXPECT_EQ(mismatch(out2, std::vector<double>(4, 7.0)), "") << "index " << bad_value;
    }
    Tensor gidx = Tensor::from_vector(
        std::vector<std::int64_t>{kBig - 1, kTwo31, 0, kTwo31 + 7, 1, kBig - 2}, {3, 2}, kGpu);
    Tensor gout = Tensor::full({3, 2}, 7.0, DType::f64, kGpu);
    gather(x, 0, gidx, gout, {.level = level});
    EXPECT_EQ(mismatch(gout, {1.5, -2.25, 1.5, -2.25, 1.5, -2.25}), "");
    Tensor gbad = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, kTwo32 + 1}, {2, 2}, kGpu);
    Tensor gout2 = Tensor::full({2, 2}, 7.0, DType::f64, kGpu);
    const std::string m =
        thrown<IndexOutOfRange>([&] { gather(x, 0, gbad, gout2, {.level = level}); });
    EXPECT_THAT(m, AllOf(HasSubstr("gather"), HasSubstr("position 3"))) << m;
    EXPECT_EQ(mismatch(gout2, std::vector<double>(4, 7.0)), "");
  }
}

// --- sums ---------------------------------------------------------------------------------------

// 2^31 + 8 copies of 0.25 (and of -0.5) sum exactly in float64 in any order: the whole-tensor sum
// (a strided input, gathered first), sum_dim along a dim of 2^31 + 8 into one output (strided
// rows) and into two (the column kernel), at every level.
TEST(LargeGpu, SumAndSumDimOverMoreThanTwoToThe31Elements) {
  REQUIRE_LARGE_DEVICE_MEMORY();
  const double total = 0.25 * static_cast<double>(kBig); // 536870914, exact
  const Tensor one = Tensor::from_vector(std::vector<double>{0.25}, {1}, kGpu);
  const Tensor two = Tensor::from_vector(std::vector<double>{0.25, -0.5}, {1, 2}, kGpu);
  const Tensor one_col = Tensor::from_vector(std::vector<double>{0.25}, {1, 1}, kGpu);
  for (auto level : {kNg, kPo}) {
    SCOPED_TRACE(std::string(to_string(level)));
    Tensor s = Tensor::full({1}, 7.0, DType::f64, kGpu);
    sum(repeated_row(one, kBig), s, {.level = level});
    EXPECT_EQ(mismatch(s, {total}), "") << "sum";
    Tensor d1 = Tensor::full({1}, 7.0, DType::f64, kGpu);
    sum_dim(repeated_row(one_col, kBig), 0, d1, {.level = level});
    EXPECT_EQ(mismatch(d1, {total}), "") << "sum_dim into one output";
    Tensor d2 = Tensor::full({2}, 7.0, DType::f64, kGpu);
    sum_dim(repeated_row(two, kBig), 0, d2, {.level = level});
    EXPECT_EQ(mismatch(d2, {total, -2 * total}), "") << "sum_dim into two outputs";
  }
}

// --- segment reductions
// ---------------------------------------------------------------------------

// Offsets of 2^16 + 3 segments over 2^31 + 8 positions: segments of about 2^15 positions up to
// 2^31 - 5, one across 2^31, an empty one past it, and the last six positions.
std::vector<std::int64_t> many_segments() {
  constexpr std::int64_t kBulk = 1 << 16, kEnd = kTwo31 - 5;
  std::vector<std::int64_t> off;
  for (std::int64_t s = 0; s <= kBulk; ++s)
    off.push_back(s * kEnd / kBulk);
  off.push_back(kTwo31 + 2);
  off.push_back(kTwo31 + 2);
  off.push_back(kBig);
  return off;
}

// What segment_reduce of 0.25 at every position gives over these offsets: sums 0.25 * length
// (exact), means 0.25, and +0.0 for the empty segment.
std::vector<double> quarter_segments(const std::vector<std::int64_t>& off, Reduce r) {
  std::vector<double> want;
  for (std::size_t s = 0; s + 1 < off.size(); ++s) {
    const std::int64_t len = off[s + 1] - off[s];
    want.push_back(len == 0 ? 0.0 : r == Reduce::mean ? 0.25 : 0.25 * static_cast<double>(len));
  }
  return want;
}

using SegmentLaunchGuard = detail::TuningGuard<detail::SegmentTuning>;

// segment_reduce over 2^31 + 8 positions (offsets past 2^31, device offsets checked on the GPU):
// portable bitwise equal to the CPU's portable result of the same view under three launch shapes
// (the staged warp per row, the pull with and without row numbers loaded ahead), and equal to the
// exact values at every level. Offsets that end one past the positions, or 2^32 past them (the
// same low 32 bits), are rejected with nothing written.
TEST(LargeGpu, SegmentReduceOverMoreThanTwoToThe31Positions) {
  SAMEBITS_REQUIRE_CUDA();
  const std::vector<std::int64_t> offv = many_segments();
  const auto segs = static_cast<std::int64_t>(offv.size()) - 1;
  const Tensor off_cpu = Tensor::from_vector(offv, {segs + 1});
  const Tensor off = off_cpu.to(kGpu);
  const Tensor host_row = Tensor::from_vector(std::vector<double>{0.25}, {1, 1});
  const Tensor row = host_row.to(kGpu);
  const TensorView x_cpu = repeated_row(host_row, kBig), x = repeated_row(row, kBig);
  const detail::SegmentTuning launches[] = {
      {}, {256, true, false, true, 0}, {128, true, false, false, 4}};
  for (Reduce r : {Reduce::sum, Reduce::mean}) {
    SCOPED_TRACE(std::string(to_string(r)));
    const std::vector<double> want = quarter_segments(offv, r);
    Tensor cpu = Tensor::full({segs, 1}, 7.0, DType::f64);
    segment_reduce(x_cpu, off_cpu, cpu, r, {.level = kPo});
    ASSERT_EQ(mismatch(cpu, want), "") << "CPU portable";
    for (const auto& launch : launches) {
      SegmentLaunchGuard g(launch);
      Tensor out = Tensor::full({segs, 1}, 7.0, DType::f64, kGpu);
      segment_reduce(x, off, out, r, {.level = kPo});
      EXPECT_TRUE(bitwise_equal(out, cpu)) << "launch block " << launch.block_threads << " staged "
                                           << launch.allow_staged << ": " << mismatch(out, want);
    }
    Tensor ng = Tensor::full({segs, 1}, 7.0, DType::f64, kGpu);
    segment_reduce(x, off, ng, r, {.level = kNg});
    EXPECT_EQ(mismatch(ng, want), "") << "not_guaranteed";
  }
  for (std::int64_t last : {kBig + 1, kBig + kTwo32}) {
    std::vector<std::int64_t> badv = offv;
    badv.back() = last;
    const Tensor bad = Tensor::from_vector(badv, {segs + 1}, kGpu);
    for (auto level : {kNg, kPo}) {
      Tensor out = Tensor::full({segs, 1}, 7.0, DType::f64, kGpu);
      const std::string m = thrown<IndexOutOfRange>(
          [&] { segment_reduce(x, bad, out, Reduce::sum, {.level = level}); });
      EXPECT_THAT(m, AllOf(HasSubstr("segment_reduce"), HasSubstr(std::to_string(kBig)))) << m;
      EXPECT_EQ(mismatch(out, std::vector<double>(static_cast<std::size_t>(segs), 7.0)), "")
          << "last offset " << last << " at " << to_string(level);
    }
  }
}

// aggregate over 2^31 + 8 edges (every edge names source row 1 of x, whose value is 0.25), with
// the segments above as the graph's rows: the same exact values as segment_reduce.
TEST(LargeGpu, AggregateOverMoreThanTwoToThe31Edges) {
  SAMEBITS_REQUIRE_CUDA();
  const std::vector<std::int64_t> offv = many_segments();
  const auto nodes = static_cast<std::int64_t>(offv.size()) - 1;
  const Tensor off = Tensor::from_vector(offv, {nodes + 1}, kGpu);
  const Tensor one_index = Tensor::from_vector(std::vector<std::int32_t>{1}, {1}, kGpu);
  const Tensor x = Tensor::from_vector(std::vector<double>{7.0, 0.25}, {2, 1}, kGpu);
  const CsrGraph graph{off, repeated_row(one_index, kBig), -1};
  for (auto level : {kNg, kPo})
    for (Reduce r : {Reduce::sum, Reduce::mean}) {
      Tensor out = Tensor::full({nodes, 1}, 7.0, DType::f64, kGpu);
      aggregate(graph, x, out, r, {.level = level});
      EXPECT_EQ(mismatch(out, quarter_segments(offv, r)), "")
          << to_string(level) << " " << to_string(r);
    }
}

// --- bincount
// -------------------------------------------------------------------------------------

// 2^31 + 8 entries, all in bin 3: the count is exact in int64 and the weighted sum of 0.25 each is
// exact in float64, at every level.
TEST(LargeGpu, BincountOverMoreThanTwoToThe31Entries) {
  SAMEBITS_REQUIRE_CUDA();
  const Tensor w = Tensor::from_vector(std::vector<double>{0.25}, {1}, kGpu);
  for (DType it : {DType::i32, DType::i64}) {
    const Tensor bin3 = it == DType::i32
                            ? Tensor::from_vector(std::vector<std::int32_t>{3}, {1}, kGpu)
                            : Tensor::from_vector(std::vector<std::int64_t>{3}, {1}, kGpu);
    const TensorView index = repeated_row(bin3, kBig);
    for (auto level : {kNg, kPo}) {
      SCOPED_TRACE(std::string(to_string(it)) + " " + std::string(to_string(level)));
      Tensor counts = Tensor::full({5}, -1.0, DType::i64, kGpu);
      bincount(index, TensorView{}, counts, {.level = level});
      EXPECT_EQ(counts.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 0, kBig, 0}));
      Tensor sums = Tensor::full({5}, 7.0, DType::f64, kGpu);
      bincount(index, repeated_row(w, kBig), sums, {.level = level});
      EXPECT_EQ(mismatch(sums, {0, 0, 0, 0.25 * static_cast<double>(kBig), 0}), "");
    }
  }
}

// --- scatter
// --------------------------------------------------------------------------------------
//
// index_add, scatter_add and scatter_reduce with 2^31 + 8 sources (rows of one feature, all sent
// to target 2 of 4). The sort and pull (the portable variant) takes fewer than 2^31 - 1 index
// positions (32-bit sort keys; rows of many features: RowScatterOfMoreThanTwoToThe31Elements...),
// so:
//   portable                 no variant that meets the level takes them: NondeterministicError,
//                            nothing written
//   run_to_run, float32      index_add and scatter_add take the exact fixed-point sum
//   run_to_run, otherwise    (float64, or scatter_reduce) NondeterministicError, nothing written
//   not_guaranteed           the atomic variant runs: exact here (float64 sums of 0.25)
// A refusal says which op refused and which limit the sources passed.

constexpr std::int64_t kTargets = 4, kTarget = 2;

struct ScatterInputs {
  Tensor src_row, target;
  TensorView src, index_vector, index; // src [kBig, 1]; index as a vector [kBig] and as [kBig, 1]
  ScatterInputs(DType dt, double value) {
    src_row = Tensor::full({1, 1}, value, dt, kGpu);
    target = Tensor::from_vector(std::vector<std::int64_t>{kTarget}, {1}, kGpu);
    src = repeated_row(src_row, kBig);
    index_vector = repeated_row(target, kBig);
    index = testing::expanded_index(target, {kBig, 1});
    index.strides[0] = 0;
  }
};

enum class ScatterOp { index_add, scatter_add, scatter_reduce_sum };
const char* name_of(ScatterOp op) {
  return op == ScatterOp::index_add     ? "index_add"
         : op == ScatterOp::scatter_add ? "scatter_add"
                                        : "scatter_reduce";
}
void run_scatter(ScatterOp op, const ScatterInputs& in, const Tensor& out, Determinism level) {
  switch (op) {
  case ScatterOp::index_add:
    index_add(out, in.index_vector, in.src, 1.0, {.level = level});
    break;
  case ScatterOp::scatter_add:
    scatter_add(out, 0, in.index, in.src, {.level = level});
    break;
  case ScatterOp::scatter_reduce_sum:
    scatter_reduce(out, 0, in.index, in.src, Reduce::sum, true, {.level = level});
    break;
  }
}

TEST(LargeGpu, ScatterRefusesWhereNoVariantTakesTheSources) {
  SAMEBITS_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    const ScatterInputs in(dt, 0.25);
    for (ScatterOp op :
         {ScatterOp::index_add, ScatterOp::scatter_add, ScatterOp::scatter_reduce_sum})
      for (auto level : {kR2r, kPo}) {
        const bool fixed_point =
            level == kR2r && dt == DType::f32 && op != ScatterOp::scatter_reduce_sum;
        if (fixed_point)
          continue; // computes: ScatterFixedPointAtRunToRunCountsEverySource
        SCOPED_TRACE(std::string(name_of(op)) + " " + std::string(to_string(dt)) + " at " +
                     std::string(to_string(level)));
        Tensor out = Tensor::full({kTargets, 1}, 7.0, dt, kGpu);
        const std::string m =
            thrown<NondeterministicError>([&] { run_scatter(op, in, out, level); });
        EXPECT_THAT(m, HasSubstr(name_of(op))) << "the error names the op: " << m;
        EXPECT_THAT(m, HasSubstr("2^31")) << "the error names the limit the sources passed: " << m;
        EXPECT_EQ(mismatch(out, std::vector<double>(kTargets, 7.0)), "") << "nothing written";
      }
  }
}

// The fixed-point sum counts all 2^31 + 8 contributions of 0.25: out + 536870914 with out =
// -2^29 is exactly 2 (one contribution fewer, or 8, would give 1.75 or 0); targets that receive
// nothing keep their bits.
TEST(LargeGpu, ScatterFixedPointAtRunToRunCountsEverySource) {
  SAMEBITS_REQUIRE_CUDA();
  const ScatterInputs in(DType::f32, 0.25);
  for (ScatterOp op : {ScatterOp::index_add, ScatterOp::scatter_add}) {
    Tensor out =
        Tensor::from_vector(std::vector<float>{7, 7, -536870912.0f, 7}, {kTargets, 1}, kGpu);
    run_scatter(op, in, out, kR2r);
    EXPECT_THAT(last_explain(), HasSubstr("ran cuda.fixed_point")) << last_explain();
    EXPECT_EQ(mismatch(out, {7, 7, 2, 7}), "") << name_of(op);
  }
}

// The atomic variant adds every source: 1 + 0.25 * (2^31 + 8), exact in float64.
TEST(LargeGpu, IndexAddAtNotGuaranteedIsExact) {
  SAMEBITS_REQUIRE_CUDA();
  const ScatterInputs in(DType::f64, 0.25);
  Tensor out = Tensor::from_vector(std::vector<double>{7, 7, 1, 7}, {kTargets, 1}, kGpu);
  run_scatter(ScatterOp::index_add, in, out, kNg);
  EXPECT_THAT(last_explain(), HasSubstr("ran cuda.atomic")) << last_explain();
  EXPECT_EQ(mismatch(out, {7, 7, 1 + 0.25 * static_cast<double>(kBig), 7}), "");
}

// scatter_reduce mean through the atomic variant divides by the number of values combined, all
// 2^31 + 8 contributions and the target's own 0.25: the mean of 0.25s is 0.25 (a count kept in 32
// bits would wrap negative and flip the sign).
TEST(LargeGpu, ScatterReduceMeanAtNotGuaranteedDividesByTheFullCount) {
  SAMEBITS_REQUIRE_CUDA();
  const ScatterInputs in(DType::f64, 0.25);
  Tensor out = Tensor::from_vector(std::vector<double>{7, 7, 0.25, 7}, {kTargets, 1}, kGpu);
  scatter_reduce(out, 0, in.index, in.src, Reduce::mean, true, {.level = kNg});
  EXPECT_THAT(last_explain(), HasSubstr("ran cuda.atomic")) << last_explain();
  EXPECT_EQ(mismatch(out, {7, 7, 0.25, 7}), "");
}

// A plan of more than 2^31 - 1 sources cannot be built on CUDA (32-bit sort keys): InvalidArgument
// naming the op and the limit.
TEST(LargeGpu, MakeIndexPlanRefusesMoreThanTwoToThe31Sources) {
  SAMEBITS_REQUIRE_CUDA();
  const ScatterInputs in(DType::f64, 0.25);
  const std::string m =
      thrown<InvalidArgument>([&] { (void)make_index_plan(in.index_vector, kTargets); });
  EXPECT_THAT(m, AllOf(HasSubstr("make_index_plan"), HasSubstr("2^31"))) << m;
}

// --- a real tensor of 2^31 + 8 float32
// ------------------------------------------------------------

// Zeros, except these positions (on both sides of 2^31, and the last one). Seen as [2^28 + 1, 8]
// they are (0, 0), (2^27, 5), (2^28 - 1, 7), (2^28, 0), (2^28, 3) and (2^28, 7).
struct Marker {
  std::int64_t pos;
  float value;
};
constexpr Marker kMarkers[] = {{0, 1},          {(std::int64_t{1} << 30) + 5, 32},
                               {kTwo31 - 1, 2}, {kTwo31, 4},
                               {kTwo31 + 3, 8}, {kBig - 1, 16}};
constexpr std::int64_t kRows8 = kBig / 8; // the tensor as [kRows8, 8]

// Sum of the markers at positions <= pos (in column `col` of the [kRows8, 8] view when col >= 0).
double marked_prefix(std::int64_t pos, int col = -1) {
  double s = 0;
  for (const auto& m : kMarkers)
    if (m.pos <= pos && (col < 0 || m.pos % 8 == col))
      s += m.value;
  return s;
}

class LargeGpuTensor : public ::testing::Test {
protected:
  // Filled on the host and copied to the device once: no device kernel writes the input.
  static void SetUpTestSuite() {
    if (!cuda_available() || !device_memory_at_least(kLargeTestBytes))
      return;
    Tensor host = Tensor::zeros({kBig}, DType::f32);
    for (const auto& m : kMarkers)
      host.data<float>()[m.pos] = m.value;
    x_ = new Tensor(host.to(kGpu));
  }
  static void TearDownTestSuite() {
    delete x_;
    x_ = nullptr;
  }
  void SetUp() override { REQUIRE_LARGE_DEVICE_MEMORY(); }
  static const Tensor& x() { return *x_; }
  static TensorView x8() { return x_->view().reshape({kRows8, 8}); }

private:
  static inline Tensor* x_ = nullptr;
};

// sum and dot read every position with 16-byte loads (1 + 32 + 2 + 4 + 8 + 16 = 63; the squares
// make 1365), sum_dim of the [2^28 + 1, 8] view reads a column of elements up to 2^31 + 7.
TEST_F(LargeGpuTensor, SumDotAndSumDimSeeEveryMarkedPosition) {
  for (auto level : {kNg, kPo}) {
    SCOPED_TRACE(std::string(to_string(level)));
    Tensor s = Tensor::full({1}, 7.0, DType::f32, kGpu);
    sum(x(), s, {.level = level});
    EXPECT_EQ(mismatch(s, {63}), "") << "sum";
    Tensor d = Tensor::full({1}, 7.0, DType::f32, kGpu);
    dot(x(), x(), d, {.level = level});
    EXPECT_EQ(mismatch(d, {1365}), "") << "dot";
    Tensor cols = Tensor::full({8}, 7.0, DType::f32, kGpu);
    sum_dim(x8(), 0, cols, {.level = level});
    EXPECT_EQ(mismatch(cols, {5, 0, 0, 8, 0, 32, 0, 18}), "") << "sum_dim";
  }
}

// `copies` copies of `v` one after another.
template <class T> std::vector<T> tiled(const std::vector<T>& v, std::int64_t copies) {
  std::vector<T> out;
  for (std::int64_t c = 0; c < copies; ++c)
    out.insert(out.end(), v.begin(), v.end());
  return out;
}

// The copies of an index that make more than the one-block check and copy takes (elements of out
// per copy: `per_copy`), so that the check kernel and the multi-block copies run.
std::int64_t copies_past_one_block(std::int64_t per_copy) {
  return detail::kOneBlockCopyMaxElements / per_copy + 1;
}

// Row copies with 4-byte words (rows past 2^31), 16-byte words (element offsets past 2^31, an
// int32 index) and gather's element copies all land on the marked values: through the one-block
// check and copy (short indices), and through the check kernel and the copy kernels (the same
// indices tiled past the one-block limit).
TEST_F(LargeGpuTensor, IndexSelectAndGatherReadRowsPastTwoToThe31) {
  const TensorView col = x().view().reshape({kBig, 1});
  const std::vector<std::int64_t> rows1 = {
      kBig - 1, kTwo31, kTwo31 + 3, kTwo31 - 1, (std::int64_t{1} << 30) + 5, 0, 1, kTwo31 + 1};
  const std::vector<double> want1 = {16, 4, 8, 2, 32, 1, 0, 0};
  const std::vector<std::int32_t> rows8 = {static_cast<std::int32_t>(kRows8 - 1), (1 << 28) - 1,
                                           1 << 27, 0, 1};
  const std::vector<double> want8 = {4, 0,  0, 8, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0,
                                     0, 32, 0, 0, 1, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<std::int64_t> grows = {kBig - 1, kTwo31, 0, kTwo31 - 1};
  const std::vector<double> gwant = {16, 4, 1, 2};
  for (const bool long_index : {false, true}) {
    SCOPED_TRACE(long_index ? "indices past the one-block limit" : "one block");
    const std::int64_t c1 = long_index ? copies_past_one_block(8) : 1;
    const std::int64_t c8 = long_index ? copies_past_one_block(5 * 8) : 1;
    const std::int64_t cg = long_index ? copies_past_one_block(4) : 1;

    Tensor idx = Tensor::from_vector(tiled(rows1, c1), {8 * c1}, kGpu);
    Tensor out = Tensor::full({8 * c1, 1}, 7.0, DType::f32, kGpu);
    index_select(col, 0, idx, out);
    EXPECT_EQ(mismatch(out, tiled(want1, c1)), "") << "rows of one float";

    Tensor idx32 = Tensor::from_vector(tiled(rows8, c8), {5 * c8}, kGpu);
    Tensor out8 = Tensor::full({5 * c8, 8}, 7.0, DType::f32, kGpu);
    index_select(x8(), 0, idx32, out8);
    EXPECT_EQ(mismatch(out8, tiled(want8, c8)), "") << "rows of eight floats";

    Tensor gidx = Tensor::from_vector(tiled(grows, cg), {4 * cg, 1}, kGpu);
    Tensor gout = Tensor::full({4 * cg, 1}, 7.0, DType::f32, kGpu);
    gather(col, 0, gidx, gout);
    EXPECT_EQ(mismatch(gout, tiled(gwant, cg)), "") << "gather";
  }
}

// histc over [0, 64] with 64 bins: each marked value alone in its bin, the zeros in bin 0 (their
// count, 2^31 + 2, rounded once to float32).
TEST_F(LargeGpuTensor, HistcCountsEveryPosition) {
  Tensor out = Tensor::full({64}, 7.0, DType::f32, kGpu);
  histc(x(), 0.0, 64.0, out);
  std::vector<double> want(64, 0.0);
  want[0] = static_cast<float>(static_cast<std::uint64_t>(kBig - 6));
  for (const auto& m : kMarkers)
    want[static_cast<std::size_t>(m.value)] = 1;
  EXPECT_EQ(mismatch(out, want), "");
}

// Rows [a, b) of t (a device view) set to 7, so that a window an op fails to write shows.
void poison(const TensorView& t, std::int64_t a, std::int64_t b) {
  const TensorView rows = t.slice(0, a, b);
  copy(Tensor::full(rows.sizes(), 7.0, rows.dtype), rows);
}

// cumsum of the line of 2^31 + 8 (a look-back over 2^20 + 1 tiles) and of the [2^28 + 1, 8] view
// along dim 0 (the group passes): around every marker, across the tile boundary below 2^31 and at
// the end, the running sums are exact.
TEST_F(LargeGpuTensor, CumsumCarriesPastTwoToThe31) {
  Tensor out = Tensor::empty({kBig}, DType::f32, kGpu);
  const TensorView line = out.view(), out8 = out.view().reshape({kRows8, 8});
  std::vector<std::int64_t> starts = {kTwo31 - 2048 - 4, kBig - 16}, rows = {kRows8 - 4};
  for (const auto& m : kMarkers) {
    starts.push_back(std::max<std::int64_t>(0, m.pos - 2));
    rows.push_back(std::max<std::int64_t>(0, m.pos / 8 - 1));
  }
  for (auto level : {kNg, kPo}) {
    SCOPED_TRACE(std::string(to_string(level)));
    for (std::int64_t a : starts)
      poison(line, a, std::min(kBig, a + 16));
    cumsum(x(), 0, line, {.level = level});
    for (std::int64_t a : starts) {
      const std::int64_t b = std::min(kBig, a + 16);
      std::vector<double> want;
      for (std::int64_t i = a; i < b; ++i)
        want.push_back(marked_prefix(i));
      EXPECT_EQ(mismatch(Tensor::copy_of(line.slice(0, a, b), Device::cpu()), want), "")
          << "line, positions [" << a << ", " << b << ")";
    }
    for (std::int64_t a : rows)
      poison(out8, a, std::min(kRows8, a + 4));
    cumsum(x8(), 0, out8, {.level = level});
    for (std::int64_t a : rows) {
      const std::int64_t b = std::min(kRows8, a + 4);
      std::vector<double> want;
      for (std::int64_t r = a; r < b; ++r)
        for (int c = 0; c < 8; ++c)
          want.push_back(marked_prefix(r * 8 + 7, c));
      EXPECT_EQ(mismatch(Tensor::copy_of(out8.slice(0, a, b), Device::cpu()), want), "")
          << "columns, rows [" << a << ", " << b << ")";
    }
  }
}

// A rows scatter sorts its index, not its elements: the [2^28 + 1, 8] view (2^31 + 8 elements)
// sent row r to target r % 4096 is sorted and pulled at portable and run_to_run (rows of 8
// features: no fixed point), as index_add and as scatter_add with the index expanded over the
// features, and every marked value lands in its target: 7 + the markers of its rows.
TEST_F(LargeGpuTensor, RowScatterOfMoreThanTwoToThe31ElementsSortsItsRows) {
  constexpr std::int64_t kM = 4096;
  Tensor host_idx = Tensor::empty({kRows8}, DType::i32);
  for (std::int64_t r = 0; r < kRows8; ++r)
    host_idx.data<std::int32_t>()[r] = static_cast<std::int32_t>(r % kM);
  const Tensor idx = host_idx.to(kGpu);
  host_idx = Tensor{};
  std::vector<double> want(static_cast<std::size_t>(kM * 8), 7.0);
  for (const auto& m : kMarkers)
    want[static_cast<std::size_t>(((m.pos / 8) % kM) * 8 + m.pos % 8)] += m.value;
  TensorView expanded = idx.view().reshape({kRows8, 1});
  expanded.shape[1] = 8;
  expanded.strides[1] = 0;
  for (auto level : {kPo, kR2r})
    for (const bool as_scatter_add : {false, true}) {
      SCOPED_TRACE(std::string(as_scatter_add ? "scatter_add" : "index_add") + " at " +
                   std::string(to_string(level)));
      Tensor out = Tensor::full({kM, 8}, 7.0, DType::f32, kGpu);
      if (as_scatter_add)
        scatter_add(out, 0, expanded, x8(), {.level = level});
      else
        index_add(out, idx, x8(), 1.0, {.level = level});
      EXPECT_THAT(last_explain(), HasSubstr("ran cuda.sort_pull")) << last_explain();
      EXPECT_EQ(mismatch(out, want), "");
    }
}

} // namespace
} // namespace samebits

// The distributed fixed-point conversions (include/samebits/distributed.hpp) on the CPU: rounding
// against a float64 reference, range and overflow counting, the scale rule, partition
// independence of the integer sums, and allreduce on a one-rank communicator. The multi-rank
// all-reduce runs under MPI in the CTest dist.mpi_same_bits_for_1_2_3_ranks.
#include "samebits/distributed.hpp"
#include "testing.hpp"

#include <cmath>
#include <cstring>
#include <limits>

using namespace samebits;
using samebits::testing::fresh_seed;
using samebits::testing::random_normal;

namespace {

// A world of one rank: every collective leaves the data as it is.
class OneRank final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return Device::cpu(); }
  void sum_i64(std::int64_t*, std::int64_t, Stream) override { ++calls; }
  void max_f64(double*, std::int64_t, Stream) override { ++calls; }
  void sum_float(void*, std::int64_t, DType, Stream) override { ++calls; }
  void all_to_all(const void* s, void* r, std::int64_t n, DType d, Stream) override {
    std::memcpy(r, s, static_cast<std::size_t>(n) * size_of(d));
  }
  void all_gather(const void* s, void* r, std::int64_t n, DType d, Stream) override {
    std::memcpy(r, s, static_cast<std::size_t>(n) * size_of(d));
  }
  int calls = 0;
};

std::vector<std::int64_t> convert(const Tensor& x, int s, std::int64_t& bad) {
  Tensor q = Tensor::zeros({x.numel()}, DType::i64), f = Tensor::zeros({1}, DType::i64);
  to_fixed(x, s, q, f, false);
  bad = f.to_vector<std::int64_t>()[0];
  return q.to_vector<std::int64_t>();
}

} // namespace

TEST(Distributed, ToFixedRoundsToNearestEvenAgainstFloat64) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = random_normal({1000}, dt, seed);
    const auto xs = samebits::testing::to_doubles(x);
    for (int s : {-3, 0, 7, 30}) {
      std::int64_t bad = -1;
      const auto q = convert(x, s, bad);
      EXPECT_EQ(bad, 0);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const long double v = std::ldexp(static_cast<long double>(xs[i]), s);
        ASSERT_LE(std::fabs(static_cast<long double>(q[i]) - v), 0.5L) << xs[i] << " s " << s;
      }
    }
  }
  // Ties go to even: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2.
  Tensor t = Tensor::from_vector<double>({2.5, 3.5, -2.5, 0.5}, {4});
  std::int64_t bad = 0;
  EXPECT_EQ(convert(t, 0, bad), (std::vector<std::int64_t>{2, 4, -2, 0}));
}

TEST(Distributed, OutOfRangeAndNonFiniteAreCountedNotConverted) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>({1.0f, 0x1p50f, 0x1p51f, inf, -inf, NAN, -0x1p50f}, {7});
  Tensor q = Tensor::full({7}, 7.0, DType::i64), f = Tensor::full({1}, 3.0, DType::i64);
  to_fixed(x, 0, q, f, true); // accumulate: converted values add to 7, the rest stay 7
  EXPECT_EQ(q.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{8, 7 + (1ll << 50), 7, 7, 7, 7, 7 - (1ll << 50)}));
  EXPECT_EQ(f.to_vector<std::int64_t>()[0], 3 + 4); // 2^51, inf, -inf, NaN (limit 2^(62-12))
}

TEST(Distributed, ScaleRule) {
  EXPECT_EQ(fixed_scale(1.0), 62 - 12 - 16 - 1); // 1 in [2^0, 2^1)
  EXPECT_EQ(fixed_scale(0.0), fixed_scale(1.0));
  EXPECT_EQ(fixed_scale(0.75), 62 - 12 - 16 - 0);
  EXPECT_EQ(fixed_scale(1e300), 62 - 12 - 16 - 997); // 1e300 in [2^996, 2^997)
  EXPECT_EQ(fixed_scale(1e-300), kMaxFixedScale);    // clamped
  EXPECT_THROW(fixed_scale(-1.0), InvalidArgument);
  EXPECT_THROW(fixed_scale(INFINITY), InvalidArgument);
  // With the default headroom, 2^16 times the reference still converts; twice that does not.
  const double m = 0.3;
  const int s = fixed_scale(m);
  Tensor x = Tensor::from_vector<double>({m * 65536, -m * 65536, m * 4 * 65536}, {3});
  std::int64_t bad = 0;
  convert(x, s, bad);
  EXPECT_EQ(bad, 1);
}

// The same contributions, split among 1..7 "ranks", each accumulating its share as integers:
// the sums, hence the floats, are the same bits for every split, and the mean is within the
// resolution of the float64 mean.
TEST(Distributed, IntegerSumsDoNotDependOnThePartition) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed);
  constexpr int kContrib = 24, kN = 300;
  std::vector<Tensor> g;
  double m = 0;
  for (int j = 0; j < kContrib; ++j) {
    g.push_back(random_normal({kN}, DType::f32, seed + j));
    Tensor mj = Tensor::empty({1}, DType::f64);
    max_abs_finite(g.back(), mj);
    m = std::fmax(m, mj.to_vector<double>()[0]);
  }
  const int s = fixed_scale(m);
  std::vector<std::uint32_t> first;
  for (int world = 1; world <= 7; ++world) {
    Tensor total = Tensor::zeros({kN}, DType::i64), bad = Tensor::zeros({1}, DType::i64);
    for (int r = 0; r < world; ++r) {
      Tensor mine = Tensor::zeros({kN}, DType::i64);
      for (int j = r; j < kContrib; j += world)
        to_fixed(g[static_cast<std::size_t>(j)], s, mine, bad, true);
      auto a = total.data<std::int64_t>();
      auto b = mine.data<std::int64_t>();
      for (int i = 0; i < kN; ++i)
        a[i] += b[i];
    }
    EXPECT_EQ(bad.to_vector<std::int64_t>()[0], 0);
    Tensor mean = Tensor::empty({kN}, DType::f32);
    from_fixed(total, s, kContrib, mean);
    const auto v = mean.to_vector<float>();
    std::vector<std::uint32_t> bits(kN);
    std::memcpy(bits.data(), v.data(), kN * sizeof(float));
    if (world == 1) {
      first = bits;
      for (int i = 0; i < kN; ++i) {
        double ref = 0;
        for (int j = 0; j < kContrib; ++j)
          ref += static_cast<double>(g[static_cast<std::size_t>(j)].data<float>()[i]);
        ref /= kContrib;
        // float32 rounding of the mean plus the fixed-point resolution
        EXPECT_LE(std::fabs(v[i] - ref), std::fabs(ref) * 0x1p-24 + std::ldexp(1.0, -s)) << i;
      }
    } else {
      EXPECT_EQ(bits, first) << "world " << world;
    }
  }
}

TEST(Distributed, FromFixedDividesOnceAndChecksArguments) {
  Tensor q = Tensor::from_vector<std::int64_t>({3, -6, 1ll << 40}, {3});
  Tensor out = Tensor::empty({3}, DType::f64);
  from_fixed(q, 2, 3, out);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{0.25, -0.5, std::ldexp(1.0, 38) / 3}));
  EXPECT_THROW(from_fixed(q, 2, 0, out), InvalidArgument);
  EXPECT_THROW(from_fixed(q, 5000, 1, out), InvalidArgument);
  Tensor small = Tensor::empty({2}, DType::f64);
  EXPECT_THROW(from_fixed(q, 0, 1, small), InvalidArgument);
}

TEST(Distributed, AllreduceOnOneRankKeepsPortableValuesWithinResolution) {
  const auto seed = fresh_seed();
  SCOPED_TRACE(seed);
  OneRank comm;
  Tensor x = random_normal({257}, DType::f32, seed);
  const auto before = x.to_vector<float>();
  Tensor y = x.clone();
  allreduce(y, Determinism::portable, comm, "x");
  EXPECT_EQ(comm.calls, 2); // one MAX of the scale, one SUM of the integers and the flag
  // One rank: the scale 2^(50 - e) resolves float32 exactly, so the values come back unchanged.
  EXPECT_EQ(y.to_vector<float>(), before);
  Tensor z = x.clone();
  allreduce(z, Determinism::run_to_run, comm, "x");
  EXPECT_EQ(z.to_vector<float>(), before);
  Tensor bad = Tensor::from_vector<float>({1.0f, NAN}, {2});
  try {
    allreduce(bad, Determinism::portable, comm, "layer.weight");
    FAIL() << "no OverflowError";
  } catch (const OverflowError& e) {
    EXPECT_NE(std::string(e.what()).find("layer.weight"), std::string::npos) << e.what();
  }
}

// cuda.tile_partials, the run_to_run sum of rows of at least 8 features into few targets: bit for
// bit the order that ops/tile_partials.hpp defines (rebuilt here on the host), close to the float64
// reference, the same bits over repeats and under both launch configurations, untouched targets
// left alone, bad indices reported with nothing written, and the shapes it declines.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <set>
#include <string>

#include "ops/tile_partials.hpp"
#include "testing.hpp"

namespace samebits {
namespace {

using testing::fresh_seed;
constexpr Determinism kR2r = Determinism::run_to_run;
const Device kGpu = Device::cuda();

class LaunchConfig {
 public:
  explicit LaunchConfig(bool alternative) { setenv("SAMEBITS_CUDA_SCATTER_CONFIG", alternative ? "1" : "0", 1); }
  ~LaunchConfig() { unsetenv("SAMEBITS_CUDA_SCATTER_CONFIG"); }
};

template <class T> bool negative_zero(T v) { return v == T(0) && std::signbit(v); }

// out after index_add(out, index, src, alpha) in the order of ops/tile_partials.hpp.
template <class T>
std::vector<T> tile_order_sum(std::vector<T> out, const std::vector<std::int64_t>& idx, const std::vector<T>& src,
                              std::int64_t M, std::int64_t F, T alpha, bool scaled) {
  using detail::kRunRows;
  using detail::kSubRows;
  using detail::kTileRows;
  const auto L = static_cast<std::int64_t>(idx.size());
  const std::int64_t chunk_tiles = detail::tile_chunk_tiles(L, M, F);
  const std::int64_t tiles = (L + kTileRows - 1) / kTileRows, chunks = (tiles + chunk_tiles - 1) / chunk_tiles;
  std::vector<T> partial(static_cast<std::size_t>(chunks * M * F), -T(0));
  for (std::int64_t c = 0; c < chunks; ++c)
    for (std::int64_t tile = c * chunk_tiles; tile < std::min(tiles, (c + 1) * chunk_tiles); ++tile) {
      const std::int64_t base = tile * kTileRows, rows = std::min(kTileRows, L - base);
      std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
      std::iota(order.begin(), order.end(), base);
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return idx[a] < idx[b]; });
      for (std::int64_t sub = 0; sub < rows; sub += kSubRows) {
        const std::int64_t n = std::min<std::int64_t>(kSubRows, rows - sub);
        for (std::int64_t j = 0; j < n;) {
          const std::int64_t t = idx[order[sub + j]];
          std::int64_t k = j;
          while (k < n && idx[order[sub + k]] == t) ++k;
          for (std::int64_t f = 0; f < F; ++f) {
            auto v = [&](std::int64_t r) {
              const T x = src[order[sub + r] * F + f];
              return scaled ? alpha * x : x;
            };
            T s = T(0);
            for (std::int64_t a = j; a < k;) {  // pieces split at multiples of kRunRows
              const std::int64_t b = std::min(k, (a / kRunRows + 1) * kRunRows);
              T piece = v(a);
              for (std::int64_t x = a + 1; x < b; ++x) piece = piece + v(x);
              s = a == j ? piece : s + piece;
              a = b;
            }
            T& p = partial[static_cast<std::size_t>((c * M + t) * F + f)];
            p = p + s;
          }
          j = k;
        }
      }
    }
  for (std::int64_t e = 0; e < M * F; ++e) {
    T acc = out[e];
    bool touched = false;
    for (std::int64_t c = 0; c < chunks; ++c) {
      const T q = partial[static_cast<std::size_t>(c * M * F + e)];
      touched |= !negative_zero(q);
      acc = acc + q;
    }
    if (touched) out[e] = acc;
  }
  return out;
}

// Bitwise equal, NaN equal to any NaN (the GPU returns its own NaN for arithmetic on one).
template <class T> std::string first_mismatch(const std::vector<T>& got, const std::vector<T>& want) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(got[i]) !=
        std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(want[i]))
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " instead of " + std::to_string(want[i]);
  }
  return "";
}

struct Case {
  std::int64_t e, n, f;
  DType dtype;
  const char* index_kind;  // "uniform", "one" (every row to target 0), "skewed" (half to target 0)
};
const Case kCases[] = {{65536, 1, 8, DType::f32, "one"},        {70001, 777, 64, DType::f32, "uniform"},
                       {100000, 3072, 9, DType::f32, "uniform"},  {131077, 1024, 33, DType::f64, "uniform"},
                       {300000, 100, 16, DType::f64, "skewed"},   {200000, 2, 130, DType::f32, "skewed"},
                       {250000, 1000, 64, DType::f32, "skewed"}};

Tensor case_index(const Case& c, std::uint64_t seed) {
  Tensor index = testing::random_index(c.e, c.n, c.e % 2 ? DType::i32 : DType::i64, seed);
  if (std::string(c.index_kind) == "uniform") return index;
  std::vector<std::int64_t> v = testing::random_index(c.e, c.n, DType::i64, seed).to_vector<std::int64_t>();
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::string(c.index_kind) == "one" || (i * 2654435761u) % 7 < 4) v[i] = 0;
  Tensor t = Tensor::empty({c.e}, DType::i64);
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

template <class T> void check_case(const Case& c, std::uint64_t seed) {
  Tensor src = testing::random_normal({c.e, c.f}, c.dtype, seed);
  Tensor index = case_index(c, seed + 1);
  Tensor out0 = testing::random_normal({c.n, c.f}, c.dtype, seed + 2);
  const auto idx = testing::to_doubles(index);
  const std::vector<std::int64_t> iv(idx.begin(), idx.end());
  const Tensor gsrc = src.to(kGpu), gidx = index.to(kGpu);
  for (double alpha : {1.0, 0.3}) {
    SCOPED_TRACE(::testing::Message() << "alpha " << alpha);
    const auto want = tile_order_sum<T>(out0.to_vector<T>(), iv, src.to_vector<T>(), c.n, c.f, static_cast<T>(alpha),
                                        alpha != 1.0);
    for (bool alt : {false, true}) {
      LaunchConfig lc(alt);
      Tensor out = out0.to(kGpu);
      index_add(out, gidx, gsrc, alpha, {.level = kR2r});
      EXPECT_NE(last_explain().find("ran cuda.tile_partials"), std::string::npos) << last_explain();
      EXPECT_EQ(first_mismatch(out.to(Device::cpu()).to_vector<T>(), want), "") << "alt " << alt;
      // scatter_add with the index expanded over the features: the same call, the same bits.
      Tensor out2 = out0.to(kGpu);
      if (alpha == 1.0) {
        scatter_add(out2, 0, testing::expanded_index(gidx, {c.e, c.f}), gsrc, {.level = kR2r});
        EXPECT_NE(last_explain().find("ran cuda.tile_partials"), std::string::npos) << last_explain();
        EXPECT_TRUE(bitwise_equal(out2, out));
      }
    }
    if (alpha != 1.0) continue;
    // Against the float64 reference.
    auto ref = testing::to_doubles(out0);
    const auto s = testing::to_doubles(src);
    for (std::int64_t i = 0; i < c.e; ++i)
      for (std::int64_t k = 0; k < c.f; ++k) ref[static_cast<std::size_t>(iv[i] * c.f + k)] += s[static_cast<std::size_t>(i * c.f + k)];
    Tensor out = out0.to(kGpu);
    index_add(out, gidx, gsrc, 1.0, {.level = kR2r});
    EXPECT_LT(testing::relative_error(out, ref), c.dtype == DType::f32 ? 1e-5 : 1e-13);
  }
}

TEST(ScatterTilesGpu, TheDefinedOrderBitForBitAndCloseToFloat64) {
  SAMEBITS_REQUIRE_CUDA();
  int case_number = 0;
  for (const Case& c : kCases) {
    if (!testing::case_in_shard(case_number++)) continue;
    const auto seed = fresh_seed();
    SCOPED_TRACE(::testing::Message() << "E=" << c.e << " N=" << c.n << " F=" << c.f << " " << to_string(c.dtype) << " "
                                      << c.index_kind << " seed " << seed);
    if (c.dtype == DType::f32) check_case<float>(c, seed);
    else check_case<double>(c, seed);
  }
}

TEST(ScatterTilesGpu, RunToRunBitwiseOver100Repeats) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor src = testing::random_normal({300000, 64}, DType::f32, seed, kGpu);
  Tensor index = testing::random_index(300000, 1000, DType::i64, seed + 1, kGpu);
  std::set<std::uint64_t> seen;
  for (int r = 0; r < 100; ++r) {
    Tensor out = Tensor::full({1000, 64}, 0.5, DType::f32, kGpu);
    index_add(out, index, src, 1.0, {.level = kR2r});
    seen.insert(content_hash(out));
  }
  EXPECT_NE(last_explain().find("ran cuda.tile_partials"), std::string::npos) << last_explain();
  EXPECT_EQ(seen.size(), 1u) << "seed " << seed;
}

// Strided source rows and output take a contiguous copy: the same bits as contiguous tensors.
TEST(ScatterTilesGpu, StridedTensorsGiveTheSameBits) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor src = testing::random_normal({70000, 12}, DType::f32, seed);
  Tensor index = testing::random_index(70000, 500, DType::i64, seed + 1, kGpu);
  Tensor out0 = testing::random_normal({500, 12}, DType::f32, seed + 2);
  Tensor want = out0.to(kGpu);
  index_add(want, index, src.to(kGpu), 1.0, {.level = kR2r});
  Tensor keep_src, keep_out;
  const TensorView ssrc = testing::strided_copy(src.to(kGpu), keep_src);
  const TensorView sout = testing::strided_copy(out0.to(kGpu), keep_out);
  index_add(sout, index, ssrc, 1.0, {.level = kR2r});
  EXPECT_NE(last_explain().find("ran cuda.tile_partials"), std::string::npos) << last_explain();
  EXPECT_EQ(testing::to_doubles(sout), testing::to_doubles(want)) << "seed " << seed;
}

// Targets no row names keep their bits, NaN payloads and negative zeros included; non-finite
// contributions reach their targets.
TEST(ScatterTilesGpu, UntouchedTargetsKeepTheirBitsAndNonFiniteValuesPropagate) {
  SAMEBITS_REQUIRE_CUDA();
  const std::int64_t e = 80000, n = 600, f = 8;
  std::vector<std::int64_t> iv(e);
  for (std::int64_t i = 0; i < e; ++i) iv[i] = 2 * ((i * 7919) % (n / 2));  // even targets only
  Tensor index = Tensor::empty({e}, DType::i64);
  std::copy(iv.begin(), iv.end(), index.data<std::int64_t>());
  Tensor src = testing::random_normal({e, f}, DType::f32, fresh_seed());
  src.data<float>()[5 * f + 1] = std::numeric_limits<float>::infinity();  // row 5 -> target iv[5]
  src.data<float>()[9 * f + 2] = std::nanf("");
  Tensor out0 = testing::random_normal({n, f}, DType::f32, fresh_seed());
  out0.data<float>()[1 * f + 3] = std::bit_cast<float>(0x7fc01234u);  // a NaN with a payload
  out0.data<float>()[3 * f + 4] = -0.0f;
  Tensor out = out0.to(kGpu);
  index_add(out, index.to(kGpu), src.to(kGpu), 1.0, {.level = kR2r});
  EXPECT_NE(last_explain().find("ran cuda.tile_partials"), std::string::npos) << last_explain();
  const auto got = out.to(Device::cpu()).to_vector<float>(), before = out0.to_vector<float>();
  for (std::int64_t t = 1; t < n; t += 2)
    for (std::int64_t k = 0; k < f; ++k)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[t * f + k]), std::bit_cast<std::uint32_t>(before[t * f + k]))
          << "target " << t << " feature " << k;
  EXPECT_TRUE(std::isinf(got[iv[5] * f + 1]) && got[iv[5] * f + 1] > 0);
  EXPECT_TRUE(std::isnan(got[iv[9] * f + 2]));
  const auto want = tile_order_sum<float>(before, iv, src.to_vector<float>(), n, f, 1.0f, false);
  EXPECT_EQ(first_mismatch(got, want), "");
}

TEST(ScatterTilesGpu, BadIndexReportedNothingWritten) {
  SAMEBITS_REQUIRE_CUDA();
  const std::int64_t e = 100000, n = 700, f = 16;
  for (std::int64_t bad : {std::int64_t{-1}, n, std::int64_t{1} << 40}) {
    Tensor index = testing::random_index(e, n, DType::i64, fresh_seed());
    index.data<std::int64_t>()[77777] = bad;  // the first bad position
    index.data<std::int64_t>()[99999] = -5;   // a later one, in the last, partial tile
    Tensor src = testing::random_normal({e, f}, DType::f32, fresh_seed(), kGpu);
    Tensor out = testing::random_normal({n, f}, DType::f32, fresh_seed(), kGpu);
    const auto before = content_hash(out);
    try {
      index_add(out, index.to(kGpu), src, 1.0, {.level = kR2r});
      ADD_FAILURE() << "no error for " << bad;
    } catch (const IndexOutOfRange& err) {
      EXPECT_NE(std::string(err.what()).find("position 77777"), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find(std::to_string(bad)), std::string::npos) << err.what();
    }
    EXPECT_NE(last_explain().find("ran cuda.tile_partials"), std::string::npos) << last_explain();
    EXPECT_EQ(content_hash(out), before) << bad;
  }
}

// Shapes it does not take go to the sort and pull, which says why.
TEST(ScatterTilesGpu, DeclinedShapesTakeTheSort) {
  SAMEBITS_REQUIRE_CUDA();
  struct S {
    std::int64_t e, n, f;
    DType dtype;
    const char* why;
  };
  for (const S s : {S{65535, 100, 8, DType::f32, "fewer than 65536"}, S{70000, 100, 7, DType::f32, "fewer than 8"},
                    S{70000, 3073, 8, DType::f32, "more than 3072"}, S{70000, 1025, 8, DType::f64, "more than 1024"}}) {
    Tensor src = testing::random_normal({s.e, s.f}, s.dtype, 1, kGpu);
    Tensor index = testing::random_index(s.e, s.n, DType::i64, 2, kGpu);
    Tensor out = Tensor::zeros({s.n, s.f}, s.dtype, kGpu);
    index_add(out, index, src, 1.0, {.level = kR2r});
    const std::string ex = last_explain();
    EXPECT_NE(ex.find("ran cuda.sort_pull"), std::string::npos) << ex;
    EXPECT_NE(ex.find(s.why), std::string::npos) << ex;
  }
}

}  // namespace
}  // namespace samebits

// gemm on CUDA: every variant against a float64 reference (all transposes, leading-dimension,
// column-major and strided operands, alpha/beta rules); the portable kernel bitwise equal to the
// CPU's portable variant for every launch tuning (tile shapes, k chunks); batch invariance of the
// portable kernel and of the pinned cuBLASLt bf16/f16 GEMM; accuracy against cuBLAS on long k;
// cuBLAS run_to_run over 100 repeats and under concurrent streams; split-K's nondeterminism; bad
// input.
#include "core/tuning.hpp"
#include "cuda/gemm_cublas.hpp"
#include "gemm_reference.hpp"
#include "ops/gemm.hpp"
#include "testing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <limits>
#include <random>
#include <set>
#include <thread>

namespace samebits {
namespace {

using testing::fresh_seed;

constexpr Transpose kN = Transpose::no, kT = Transpose::yes;
const Device kGpu = Device::cuda();

using testing::Layout;
using testing::Operand;

// An operand stored on the GPU in `layout`.
Operand gpu_operand(std::int64_t rows, std::int64_t cols, DType dtype, std::uint64_t seed,
                    Layout layout) {
  return testing::make_operand(rows, cols, dtype, seed, layout, kGpu);
}

struct Shape3 {
  std::int64_t m, n, k;
};

struct VariantCase {
  const char* name;
  Determinism level;
};
const VariantCase kVariants[] = {{"cuda.split_k_atomic", Determinism::not_guaranteed},
                                 {"cuda.cublas", Determinism::run_to_run},
                                 {"cuda.tiled", Determinism::portable}};

class GemmGpuReference : public ::testing::TestWithParam<std::tuple<DType, Transpose, Transpose>> {
};

TEST_P(GemmGpuReference, EveryVariantShapeAndLayout) {
  SAMEBITS_REQUIRE_CUDA();
  const auto [dtype, ta, tb] = GetParam();
  const double eps = dtype == DType::f32 ? 6e-8 : 1.2e-16;
  const Shape3 shapes[] = {{1, 1, 1},  {0, 5, 3},     {5, 0, 3},     {4, 3, 0},
                           {7, 13, 5}, {37, 19, 300}, {130, 33, 70}, {100, 70, 600}};
  for (const auto& s : shapes) {
    if (!testing::within_work_limit(s.m * s.n * s.k))
      continue;
    for (Layout layout :
         {Layout::contiguous, Layout::leading_dim, Layout::strided, Layout::column_major})
      for (auto [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{-1.5, 0.75}, std::pair{0.5, 1.0}}) {
        const auto seed = fresh_seed();
        Operand a = ta == kT ? gpu_operand(s.k, s.m, dtype, seed, layout)
                             : gpu_operand(s.m, s.k, dtype, seed, layout);
        Operand b = tb == kT ? gpu_operand(s.n, s.k, dtype, seed + 1, layout)
                             : gpu_operand(s.k, s.n, dtype, seed + 1, layout);
        Tensor c_host = testing::random_normal({s.m, s.n}, dtype, seed + 2);
        const auto c0 = testing::to_doubles(c_host);
        std::vector<double> mag;
        const auto ref = testing::gemm_reference(ta, tb, alpha, a.values, b.values, beta, c0, s.m,
                                                 s.n, s.k, &mag);
        for (const auto& v : kVariants) {
          SCOPED_TRACE(fmt::format("{} seed {} m={} n={} k={} layout={} alpha={} beta={}", v.name,
                                   seed, s.m, s.n, s.k, static_cast<int>(layout), alpha, beta));
          Tensor c = c_host.to(kGpu);
          if (beta == 0)
            fill(c, std::nan("")); // must be ignored
          // cuBLAS needs a unit stride; strided operands go through selection instead.
          const bool force = !(layout == Layout::strided && std::string(v.name) == "cuda.cublas");
          Options o{.level = v.level};
          if (force)
            o.variant = v.name;
          gemm(ta, tb, alpha, a.view, b.view, beta, c, o);
          const auto got = testing::to_doubles(c);
          int bad = 0;
          for (std::size_t e = 0; e < ref.size(); ++e)
            if (!(std::abs(got[e] - ref[e]) <=
                  eps * static_cast<double>(s.k + 3) * mag[e] + 1e-300))
              ++bad;
          EXPECT_EQ(bad, 0);
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(All, GemmGpuReference,
                         ::testing::Combine(::testing::Values(DType::f32, DType::f64),
                                            ::testing::Values(kN, kT), ::testing::Values(kN, kT)));

// Launch tunings the portable tests run: automatic, each tile shape, and k cut into small chunks
// (more thread blocks along k, sums combined by the second kernel) or one chunk per tile.
using detail::GemmF64Mma;
using detail::GemmTiles;
using detail::GemmTuning;
const GemmTuning kTunings[] = {{},
                               {.tiles = GemmTiles::wide},
                               {.tiles = GemmTiles::narrow},
                               {.tiles = GemmTiles::deep},
                               {.group_blocks = 1},
                               {.tiles = GemmTiles::wide, .group_blocks = 2},
                               {.tiles = GemmTiles::narrow, .group_blocks = 256},
                               {.tiles = GemmTiles::thin},
                               {.tiles = GemmTiles::thin, .group_blocks = 1},
                               {.tiles = GemmTiles::wide, .f64_mma = GemmF64Mma::off},
                               {.group_blocks = 1, .f64_mma = GemmF64Mma::off},
                               {.tiles = GemmTiles::wide, .f64_mma = GemmF64Mma::m8n8k4}};
std::string describe(const GemmTuning& t) {
  return fmt::format("tiles {} group_blocks {} f64_mma {}", static_cast<int>(t.tiles),
                     t.group_blocks, static_cast<int>(t.f64_mma));
}

struct Case {
  Transpose ta, tb;
  Shape3 s;
  double alpha, beta;
};

TEST(GemmGpu, PortableEqualsCpuBitwiseForEveryTileShape) {
  SAMEBITS_REQUIRE_CUDA();
  const Case cases[] = {
      {kN, kN, {2708, 16, 1433}, 1.0, 0.0}, // Cora: x @ W1
      {kT, kN, {1433, 16, 2708}, 1.0, 1.0}, // x^T @ dH, accumulated
      {kN, kN, {2708, 7, 16}, 1.0, 0.0},    // h @ W2
      {kT, kN, {16, 7, 2708}, 1.0, 0.0},    // h^T @ dO
      {kN, kT, {2708, 16, 7}, 1.0, 0.0},    // dO @ W2^T
      {kN, kN, {1, 1, 1}, 1.0, 0.0},
      {kN, kN, {3, 5, 0}, 2.0, -1.0},
      {kT, kT, {129, 257, 33}, 0.3, 0.0},
      {kN, kT, {300, 200, 517}, -1.25, 0.5},
      {kT, kN, {65, 130, 1000}, 1.0, -1.0},
      {kN, kN, {1000, 128, 128}, 1.0, 0.0},
      {kN, kN, {17, 3, 4097}, 0.0, 1.5},
      {kN, kT, {3, 40, 600}, 1.0, 0.0},
      {kT, kT, {33, 20, 300}, -0.5, 1.0},
      {kT, kN, {5, 9, 3000}, 0.7, 0.3},
      {kN, kT, {32, 32, 1500}, 1.0, 0.0},
      {kN, kN, {1, 1, 1024}, -2.0, 0.0},
      {kN, kN, {260, 300, 1000}, 1.0, 0.5}, // whole 16-byte tiles, then a last k step of 8
      {kN, kN, {70000, 16, 128}, 1.0, 0.0}, // many rows, 16 columns
      {kT, kN, {66000, 20, 37}, 0.5, 1.0},  // the same with a transposed a, two column tiles
      {kN, kN, {40, 50, 256}, 1.0, 0.0},    // k: one whole canonical block
      {kN, kN, {40, 50, 255}, 1.0, 0.0},
      {kT, kN, {140, 129, 513}, 1.0, 0.0},
      {kN, kT, {64, 70, 70001}, 1.0, 0.0},    // 274 blocks: odd trees, many chunks
      {kT, kN, {130, 129, 140000}, 1.0, 0.0}, // the weight-gradient shape, scaled down
      {kN, kN, {300, 260, 4100}, 1.0, -1.0},
      // a transposed with m % 4 == 0: the wide float tiles' 16-byte loads along m (whole tiles
      // and edge tiles; one chunk, and k split into chunks summed by the second kernel)
      {kT, kN, {256, 136, 5000}, 1.0, 0.5},
      {kT, kN, {384, 256, 20000}, -0.5, 0.0},
  };
  int case_number = 0;
  for (DType dtype : {DType::f32, DType::f64})
    for (const auto& cs : cases) {
      if (!testing::case_in_shard(case_number++) ||
          !testing::within_work_limit(cs.s.m * cs.s.n * cs.s.k))
        continue;
      const auto seed = fresh_seed();
      SCOPED_TRACE(fmt::format("seed {} dtype {} m={} n={} k={} ta={} tb={}", seed,
                               to_string(dtype), cs.s.m, cs.s.n, cs.s.k, cs.ta == kT, cs.tb == kT));
      Tensor a = cs.ta == kT ? testing::random_normal({cs.s.k, cs.s.m}, dtype, seed)
                             : testing::random_normal({cs.s.m, cs.s.k}, dtype, seed);
      Tensor b = cs.tb == kT ? testing::random_normal({cs.s.n, cs.s.k}, dtype, seed + 1)
                             : testing::random_normal({cs.s.k, cs.s.n}, dtype, seed + 1);
      Tensor c0 = testing::random_normal({cs.s.m, cs.s.n}, dtype, seed + 2);
      Tensor cpu = c0.clone();
      gemm(cs.ta, cs.tb, cs.alpha, a, b, cs.beta, cpu, {.level = Determinism::portable});
      Tensor ga = a.to(kGpu), gb = b.to(kGpu);
      for (const auto& t : kTunings) {
        const detail::TuningGuard<GemmTuning> o(t);
        Tensor gc = c0.to(kGpu);
        gemm(cs.ta, cs.tb, cs.alpha, ga, gb, cs.beta, gc, {.level = Determinism::portable});
        EXPECT_NE(last_explain().find("cuda.tiled"), std::string::npos) << last_explain();
        EXPECT_TRUE(bitwise_equal(gc.to(Device::cpu()), cpu))
            << describe(t) << ": " << last_explain();
      }
    }
}

// The float64 wide tiles on the FP64 tensor cores against the same tiles on the CUDA cores and
// the CPU, bitwise, over generated shapes (k around the instruction's 4, the 8-deep step and the
// 256-deep block; edges in m and n), with operands that mix signed zeros, infinities, NaN,
// subnormals and wide exponents into random normals: the instruction must round, order and treat
// special values exactly as the fma chain does.
TEST(GemmGpu, Float64TensorCoresEqualCudaCoresAndCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 99);
  auto spice = [&](Tensor& t) { // a few special values in place of normals
    auto v = t.to_vector<double>();
    for (auto& x : v) {
      const int p = pick(rng);
      if (p == 0)
        x = 0.0;
      else if (p == 1)
        x = -0.0;
      else if (p == 2)
        x = std::ldexp(x, -1060); // subnormal
      else if (p == 3)
        x = std::ldexp(x, pick(rng) - 50);
    }
    if (!v.empty() && pick(rng) < 30)
      v[static_cast<std::size_t>(pick(rng)) % v.size()] =
          pick(rng) % 2 ? std::numeric_limits<double>::infinity() : std::nan("");
    t = Tensor::from_vector(v, t.sizes());
  };
  int case_number = 0;
  for (std::int64_t k : {1, 3, 4, 5, 8, 9, 255, 256, 257, 1031}) {
    for (const auto& [m, n] :
         {std::pair<std::int64_t, std::int64_t>{128, 128}, {130, 200}, {257, 129}, {1, 300}}) {
      for (Transpose ta : {kN, kT}) {
        if (!testing::case_in_shard(case_number++))
          continue;
        SCOPED_TRACE(fmt::format("m={} n={} k={} ta={}", m, n, k, ta == kT));
        Tensor a = ta == kT ? testing::random_normal({k, m}, DType::f64, seed + 1)
                            : testing::random_normal({m, k}, DType::f64, seed + 1);
        Tensor b = testing::random_normal({k, n}, DType::f64, seed + 2);
        spice(a);
        spice(b);
        Tensor c0 = testing::random_normal({m, n}, DType::f64, seed + 3);
        Tensor cpu = c0.clone();
        gemm(ta, kN, 0.75, a, b, 0.5, cpu, {.level = Determinism::portable});
        Tensor ga = a.to(kGpu), gb = b.to(kGpu);
        for (GemmF64Mma f : {GemmF64Mma::automatic, GemmF64Mma::m8n8k4, GemmF64Mma::off})
          for (std::int64_t g : {0, 1}) {
            const detail::TuningGuard<GemmTuning> o(
                {.tiles = GemmTiles::wide, .group_blocks = g, .f64_mma = f});
            Tensor gc = c0.to(kGpu);
            gemm(ta, kN, 0.75, ga, gb, 0.5, gc, {.level = Determinism::portable});
            EXPECT_EQ(last_explain().find("FP64 tensor cores") != std::string::npos,
                      f != GemmF64Mma::off)
                << last_explain();
            EXPECT_TRUE(bitwise_equal(gc.to(Device::cpu()), cpu))
                << "f64_mma " << static_cast<int>(f) << ", group_blocks " << g << ": "
                << last_explain();
          }
      }
    }
  }
}

TEST(GemmGpu, PortableStridedOperandsEqualCpu) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Operand a = gpu_operand(90, 300, DType::f32, seed, Layout::strided);
  Operand b = gpu_operand(70, 300, DType::f32, seed + 1, Layout::leading_dim);
  Tensor cpu = Tensor::empty({90, 70}, DType::f32);
  gemm(kN, kT, 1.0, a.values, b.values, 0.0, cpu, {.level = Determinism::portable});
  Tensor big = Tensor::full({90, 100}, std::nan(""), DType::f32, kGpu);
  TensorView c = big.view().slice(1, 10, 80); // an output with a leading dimension
  for (const auto& t : kTunings) {
    const detail::TuningGuard<GemmTuning> o(t);
    gemm(kN, kT, 1.0, a.view, b.view, 0.0, c, {.level = Determinism::portable});
    EXPECT_TRUE(bitwise_equal(Tensor::copy_of(c, Device::cpu()), cpu)) << describe(t);
  }
}

// Many rows and few columns with a and b in every layout, and with an a whose row stride is a
// multiple of 16 bytes but whose start is not (its 16-byte loads must be refused): bitwise equal to
// the CPU.
TEST(GemmGpu, ManyRowsEqualCpuForEveryLayout) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t m = 70000, n = 16, k = 300;
  if (!testing::within_work_limit(m * n * k))
    GTEST_SKIP() << "above SAMEBITS_TEST_WORK_LIMIT";
  auto check = [&](const TensorView& a, const Tensor& a_values, const TensorView& b,
                   const Tensor& b_values, const std::string& what) {
    Tensor cpu = Tensor::empty({m, n}, DType::f32);
    gemm(kN, kN, 1.0, a_values, b_values, 0.0, cpu, {.level = Determinism::portable});
    Tensor gc = Tensor::empty({m, n}, DType::f32, kGpu);
    gemm(kN, kN, 1.0, a, b, 0.0, gc, {.level = Determinism::portable});
    EXPECT_TRUE(bitwise_equal(gc.to(Device::cpu()), cpu)) << what;
  };
  int number = 0;
  for (Layout la : {Layout::contiguous, Layout::leading_dim, Layout::strided, Layout::column_major})
    for (Layout lb : {Layout::contiguous, Layout::column_major}) {
      const Operand a = gpu_operand(m, k, DType::f32, seed + 2 * number, la);
      const Operand b = gpu_operand(k, n, DType::f32, seed + 2 * number + 1, lb);
      check(a.view, a.values, b.view, b.values, "layouts " + std::to_string(number++));
    }
  const Tensor wide = testing::random_normal({m, k + 4}, DType::f32, seed + 100).to(kGpu);
  const TensorView shifted = wide.view().slice(1, 1, k + 1); // starts 4 bytes into each 16
  const Operand b = gpu_operand(k, n, DType::f32, seed + 101, Layout::contiguous);
  check(shifted, Tensor::copy_of(shifted, Device::cpu()), b.view, b.values,
        "a starting off 16 bytes");
}

// The thin kernel (one thread per output row) over generated shapes: every n in 1..33 (column
// tiles of 8, 16 and 32, and two tiles for 33), k around one canonical block and several blocks,
// m from 1 to 5000, op(a) in every layout (column-major: m-fast, the element-wise path; strided
// and shifted: no 16-byte loads), b contiguous or column-major, the alpha/beta rules; forced thin
// tiles with k whole or in chunks of one block (the second kernel), and automatic for tall
// products (where the thin tiles are chosen): bitwise equal to the CPU.
TEST(GemmGpu, ThinKernelEqualsCpuOverGeneratedShapes) {
  SAMEBITS_REQUIRE_CUDA();
  const GemmTuning thin_tunings[] = {{.tiles = GemmTiles::thin},
                                     {.tiles = GemmTiles::thin, .group_blocks = 1}};
  const Layout layouts[] = {Layout::contiguous, Layout::column_major, Layout::strided,
                            Layout::leading_dim};
  const std::pair<double, double> scales[] = {{1.0, 0.0}, {-1.5, 0.75}, {0.5, 1.0}, {1.0, 1.0}};
  int number = 0;
  auto check = [&](DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                   const GemmTuning* tunings, std::size_t count, bool expect_thin) {
    const int at = number++;
    if (!testing::case_in_shard(at) || !testing::within_work_limit(m * n * k))
      return;
    const auto seed = fresh_seed();
    const Layout la = layouts[at % 4],
                 lb = (at / 4) % 2 == 0 ? Layout::contiguous : Layout::column_major;
    const auto [alpha, beta] = scales[(at / 8) % 4];
    SCOPED_TRACE(fmt::format("seed {} dtype {} m={} n={} k={} layouts {} {} alpha {} beta {}", seed,
                             to_string(dtype), m, n, k, static_cast<int>(la), static_cast<int>(lb),
                             alpha, beta));
    const Operand a = gpu_operand(m, k, dtype, seed, la);
    const Operand b = gpu_operand(k, n, dtype, seed + 1, lb);
    const Tensor c0 = testing::random_normal({m, n}, dtype, seed + 2);
    Tensor cpu = c0.clone();
    gemm(kN, kN, alpha, a.values, b.values, beta, cpu, {.level = Determinism::portable});
    for (std::size_t t = 0; t < count; ++t) {
      const detail::TuningGuard<GemmTuning> o(tunings[t]);
      Tensor gc = c0.to(kGpu);
      gemm(kN, kN, alpha, a.view, b.view, beta, gc, {.level = Determinism::portable});
      if (expect_thin) {
        EXPECT_NE(last_explain().find("thin"), std::string::npos) << last_explain();
      }
      EXPECT_TRUE(bitwise_equal(gc.to(Device::cpu()), cpu))
          << describe(tunings[t]) << ": " << last_explain();
    }
  };
  for (DType dtype : {DType::f32, DType::f64}) {
    for (std::int64_t m : {1, 129, 5000})
      for (std::int64_t n = 1; n <= 33; ++n)
        for (std::int64_t k : {1, 255, 256, 257, 1000})
          check(dtype, m, n, k, thin_tunings, std::size(thin_tunings), true);
    const GemmTuning automatic[] = {{}};
    for (std::int64_t n : {1, 7, 8, 9, 16, 17, 31, 32, 33})
      for (std::int64_t k : {1, 16, 128, 257, 1000})
        check(dtype, 17000, n, k, automatic, 1, n <= 32);
  }
  // A transposed a (m-fast) and an a whose rows start 4 bytes into 16 (16-byte loads refused).
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t m = 20000, n = 16, k = 300;
  if (!testing::within_work_limit(m * n * k))
    return;
  const Tensor at = testing::random_normal({k, m}, DType::f32, seed);
  const Tensor bt = testing::random_normal({k, n}, DType::f32, seed + 1);
  Tensor cpu = Tensor::empty({m, n}, DType::f32);
  gemm(kT, kN, 1.0, at, bt, 0.0, cpu, {.level = Determinism::portable});
  Tensor gc = Tensor::empty({m, n}, DType::f32, kGpu);
  gemm(kT, kN, 1.0, at.to(kGpu), bt.to(kGpu), 0.0, gc, {.level = Determinism::portable});
  EXPECT_NE(last_explain().find("thin"), std::string::npos) << last_explain();
  EXPECT_TRUE(bitwise_equal(gc.to(Device::cpu()), cpu)) << "transposed a";
  const Tensor wide = testing::random_normal({m, k + 4}, DType::f32, seed + 2).to(kGpu);
  const TensorView shifted = wide.view().slice(1, 1, k + 1);
  Tensor cpu2 = Tensor::empty({m, n}, DType::f32);
  gemm(kN, kN, 1.0, Tensor::copy_of(shifted, Device::cpu()), bt, 0.0, cpu2,
       {.level = Determinism::portable});
  Tensor gc2 = Tensor::empty({m, n}, DType::f32, kGpu);
  gemm(kN, kN, 1.0, shifted, bt.to(kGpu), 0.0, gc2, {.level = Determinism::portable});
  EXPECT_TRUE(bitwise_equal(gc2.to(Device::cpu()), cpu2)) << "a starting off 16 bytes";
}

// The same row gives the same bits inside batches of 1 to 4096 rows (portable: by construction,
// the canonical order depends on k only), and equals the CPU's.
TEST(GemmGpu, PortableRowDoesNotDependOnTheBatch) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t k = 4096, n = 512;
  Tensor all = testing::random_normal({4096, k}, DType::f32, seed, kGpu);
  Tensor w = testing::random_normal({k, n}, DType::f32, seed + 1, kGpu);
  Tensor first = Tensor::empty({1, n}, DType::f32, kGpu);
  gemm(kN, kN, 1.0, all.view().slice(0, 0, 1), w, 0.0, first, {.level = Determinism::portable});
  const Tensor want = first.to(Device::cpu());
  for (std::int64_t rows : {1, 2, 3, 8, 17, 64, 100, 128, 129, 1000, 2048, 4096}) {
    if (!testing::within_work_limit(rows * n * k))
      continue;
    Tensor c = Tensor::empty({rows, n}, DType::f32, kGpu);
    gemm(kN, kN, 1.0, all.view().slice(0, 0, rows), w, 0.0, c, {.level = Determinism::portable});
    EXPECT_TRUE(bitwise_equal(Tensor::copy_of(c.view().slice(0, 0, 1), Device::cpu()), want))
        << rows << " rows: " << last_explain();
  }
  Tensor cpu = Tensor::empty({1, n}, DType::f32);
  gemm(kN, kN, 1.0, Tensor::copy_of(all.view().slice(0, 0, 1), Device::cpu()), w.to(Device::cpu()),
       0.0, cpu, {.level = Determinism::portable});
  EXPECT_TRUE(bitwise_equal(cpu, want));
}

// The pinned cuBLASLt half GEMM (run_to_run material for inference), bfloat16 and float16: the
// same row inside batches of 1 to 4096 rows gives the same bits (the tile changes with m up to
// 512), and row 0 is the product within float32 accumulation plus one rounding to the dtype.
TEST(GemmGpu, PinnedHalfRowDoesNotDependOnTheBatch) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t k = 4096, n = 4096, rows_max = 4096;
  if (!testing::within_work_limit(n * k)) // cuBLASLt's kernels, one row at a time
    GTEST_SKIP() << "above SAMEBITS_TEST_WORK_LIMIT";
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(to_string(dt)));
    auto half_of = [&](std::int64_t count, std::uint64_t sd) {
      Tensor h = Tensor::empty({count}, dt);
      convert(testing::random_normal({count}, DType::f32, sd), h);
      return h;
    };
    const Tensor ha = half_of(rows_max * k, seed), hw = half_of(k * n, seed + 1);
    const Tensor a = ha.to(kGpu), w = hw.to(kGpu);
    Tensor c = Tensor::empty({rows_max, n}, dt, kGpu);
    const detail::PinnedHalfGemm g(n, k, 4096, nullptr, dt);
    Tensor want;
    for (std::int64_t rows :
         {1, 2, 3, 5, 8, 16, 31, 64, 100, 128, 255, 256, 513, 1000, 1024, 2048, 4096}) {
      if (!testing::within_work_limit(rows * n * k))
        continue;
      g.run(a.view().data, w.view().data, c.view().data, rows);
      const Tensor row0 = Tensor::copy_of(c.view().slice(0, 0, 1), Device::cpu());
      if (rows == 1)
        want = row0;
      EXPECT_TRUE(bitwise_equal(row0, want)) << rows << " rows, " << g.describe();
    }
    // row 0 against float64
    const auto av = testing::to_doubles(ha), wv = testing::to_doubles(hw),
               got = testing::to_doubles(want);
    const double u = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
    int bad = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = av[static_cast<std::size_t>(p)] * wv[static_cast<std::size_t>(p * n + j)];
        ref += x, mag += std::fabs(x);
      }
      if (!(std::fabs(got[static_cast<std::size_t>(j)] - ref) <=
            u * std::fabs(ref) + 2.0 * k * 0x1p-24 * mag) &&
          bad++ < 5)
        ADD_FAILURE() << "column " << j << ": " << got[static_cast<std::size_t>(j)] << ", float64 "
                      << ref;
    }
  }
}

// On k >= 1024 the portable kernel's largest error relative to sum |a||b| against cuBLAS's (FP32,
// no TF32) on the same inputs, over the first 16 rows. Asserted where cuBLAS runs whole-k chains
// (a 2048 x 2048 output: more tiles than SMs, no split of k) and on very long k; printed for a
// small output, where cuBLAS splits k into short chains and is more accurate than 256-long blocks.
TEST(GemmGpu, PortableErrorIsNoLargerThanCublasOnLongK) {
  SAMEBITS_REQUIRE_CUDA();
  struct Case {
    std::int64_t m, n, k;
    bool assert_le;
  };
  for (const Case& cs : {Case{2048, 2048, 1031, true}, Case{2048, 2048, 4096, true},
                         Case{64, 64, 65536, true}, Case{64, 64, 1031, false}}) {
    if (!testing::within_work_limit(cs.m * cs.n * cs.k))
      continue;
    const auto seed = fresh_seed();
    SCOPED_TRACE(fmt::format("seed {} m={} n={} k={}", seed, cs.m, cs.n, cs.k));
    const std::int64_t rows = 16, m = cs.m, n = cs.n, k = cs.k;
    Tensor a = testing::random_normal({m, k}, DType::f32, seed);
    Tensor b = testing::random_normal({k, n}, DType::f32, seed + 1);
    std::vector<double> mag;
    const Tensor a_rows = Tensor::copy_of(a.view().slice(0, 0, rows), Device::cpu());
    const auto ref = testing::gemm_reference(kN, kN, 1.0, a_rows, b, 0.0,
                                             std::vector<double>(rows * n), rows, n, k, &mag);
    Tensor ga = a.to(kGpu), gb = b.to(kGpu);
    auto worst = [&](const char* variant, Determinism level) {
      Tensor c = Tensor::empty({m, n}, DType::f32, kGpu);
      gemm(kN, kN, 1.0, ga, gb, 0.0, c, {.level = level, .variant = variant});
      const auto got =
          testing::to_doubles(Tensor::copy_of(c.view().slice(0, 0, rows), Device::cpu()));
      double e = 0;
      for (std::size_t i = 0; i < ref.size(); ++i)
        e = std::max(e, std::abs(got[i] - ref[i]) / mag[i]);
      return e;
    };
    const double ours = worst("cuda.tiled", Determinism::portable);
    const double blas = worst("cuda.cublas", Determinism::run_to_run);
    std::printf("[%lld x %lld] k=%lld: max error / sum|a||b|: portable %.3g, cuBLAS %.3g\n",
                static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                ours, blas);
    if (cs.assert_le) {
      EXPECT_LE(ours, blas);
    }
  }
}

TEST(GemmGpu, CublasBitwiseOver100Repeats) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor a = testing::random_normal({1000, 700}, dtype, seed, kGpu);
    Tensor b = testing::random_normal({700, 300}, dtype, seed + 1, kGpu);
    Tensor c = Tensor::empty({1000, 300}, dtype, kGpu);
    std::set<std::uint64_t> hashes;
    for (int r = 0; r < 100; ++r) {
      gemm(kN, kN, 1.0, a, b, 0.0, c, {.level = Determinism::run_to_run});
      hashes.insert(content_hash(c));
    }
    EXPECT_NE(last_explain().find("cuda.cublas"), std::string::npos) << last_explain();
    EXPECT_EQ(hashes.size(), 1u) << "seed " << seed;
  }
}

TEST(GemmGpu, CublasSameBitsUnderConcurrentStreams) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // Shapes that make cuBLAS pick different kernels (some with split-K and workspace use).
  const Shape3 shapes[] = {{2708, 16, 1433}, {64, 64, 20000}, {1024, 1024, 1024}, {4096, 128, 128}};
  std::vector<Tensor> as, bs, expect;
  for (std::size_t i = 0; i < std::size(shapes); ++i) {
    const auto& s = shapes[i];
    as.push_back(testing::random_normal({s.m, s.k}, DType::f32, seed + 2 * i, kGpu));
    bs.push_back(testing::random_normal({s.k, s.n}, DType::f32, seed + 2 * i + 1, kGpu));
    Tensor c = Tensor::empty({s.m, s.n}, DType::f32, kGpu);
    gemm(kN, kN, 1.0, as[i], bs[i], 0.0, c, {.level = Determinism::run_to_run});
    expect.push_back(c.to(Device::cpu()));
  }
  constexpr int kThreads = 6;
  std::vector<int> mismatches(kThreads, 0), errors(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        cudaStream_t s = nullptr;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
          ++errors[t];
          return;
        }
        std::vector<Tensor> outs;
        for (const auto& sh : shapes)
          outs.push_back(Tensor::empty({sh.m, sh.n}, DType::f32, kGpu));
        for (int r = 0; r < 10; ++r)
          for (std::size_t i = 0; i < std::size(shapes); ++i) {
            const std::size_t j = (i + static_cast<std::size_t>(t)) % std::size(shapes);
            gemm(kN, kN, 1.0, as[j], bs[j], 0.0, outs[j],
                 {.level = Determinism::run_to_run, .stream = Stream{s}});
            if (cudaStreamSynchronize(s) != cudaSuccess) {
              ++errors[t];
              return;
            }
            if (!bitwise_equal(outs[j].to(Device::cpu()), expect[j]))
              ++mismatches[t];
          }
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++errors[t];
      }
    });
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], 0) << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
}

TEST(GemmGpu, SplitKVariesRunToRun) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  Tensor a = testing::random_normal({64, 16384}, DType::f32, seed, kGpu);
  Tensor b = testing::random_normal({16384, 64}, DType::f32, seed + 1, kGpu);
  Tensor c0 = testing::random_normal({64, 64}, DType::f32, seed + 2, kGpu);
  std::set<std::uint64_t> hashes;
  for (int r = 0; r < 1000 && hashes.size() < 2; ++r) {
    Tensor c = c0.clone();
    gemm(kN, kN, 1.0, a, b, 0.5, c,
         {.level = Determinism::not_guaranteed, .variant = "cuda.split_k_atomic"});
    hashes.insert(content_hash(c));
  }
  EXPECT_GE(hashes.size(), 2u) << "seed " << seed;
}

// Split-K through every tile shape, the float wide tiles' 16-byte loads included (k chunks start
// at multiples of 16; interior blocks of 128 x 128 outputs): against the float64 reference.
TEST(GemmGpu, SplitKThroughEveryTileShapeMatchesReference) {
  SAMEBITS_REQUIRE_CUDA();
  const auto seed = fresh_seed();
  const std::int64_t m = 260, n = 300, k = 1000;
  if (!testing::within_work_limit(m * n * k))
    GTEST_SKIP() << "above SAMEBITS_TEST_WORK_LIMIT";
  Tensor a = testing::random_normal({m, k}, DType::f32, seed);
  Tensor b = testing::random_normal({k, n}, DType::f32, seed + 1);
  Tensor c_host = testing::random_normal({m, n}, DType::f32, seed + 2);
  std::vector<double> mag;
  const auto ref =
      testing::gemm_reference(kN, kN, 1.0, a, b, 0.5, testing::to_doubles(c_host), m, n, k, &mag);
  Tensor ga = a.to(kGpu), gb = b.to(kGpu);
  for (const auto& t : kTunings) {
    const detail::TuningGuard<GemmTuning> o(t);
    Tensor c = c_host.to(kGpu);
    gemm(kN, kN, 1.0, ga, gb, 0.5, c,
         {.level = Determinism::not_guaranteed, .variant = "cuda.split_k_atomic"});
    const auto got = testing::to_doubles(c);
    int bad = 0;
    for (std::size_t e = 0; e < ref.size(); ++e)
      if (!(std::abs(got[e] - ref[e]) <= 6e-8 * static_cast<double>(k + 3) * mag[e]))
        ++bad;
    EXPECT_EQ(bad, 0) << describe(t) << " seed " << seed;
  }
}

TEST(GemmGpu, SmallProductsUseTheTiledKernelAtRunToRun) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor a = testing::random_normal({2708, 16}, DType::f32, fresh_seed(), kGpu);
  Tensor b = testing::random_normal({16, 7}, DType::f32, fresh_seed(), kGpu);
  Tensor c = Tensor::empty({2708, 7}, DType::f32, kGpu);
  gemm(kN, kN, 1.0, a, b, 0.0, c, {.level = Determinism::run_to_run});
  EXPECT_NE(last_explain().find("ran cuda.tiled_small"), std::string::npos) << last_explain();
  Tensor c2 = Tensor::empty({2708, 7}, DType::f32, kGpu);
  gemm(kN, kN, 1.0, a, b, 0.0, c2, {.level = Determinism::portable, .variant = "cuda.tiled"});
  EXPECT_TRUE(bitwise_equal(c, c2));
}

TEST(GemmGpu, SelectionPerLevel) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor a = testing::random_normal({30, 100}, DType::f32, fresh_seed(), kGpu);
  Tensor b = testing::random_normal({100, 20}, DType::f32, fresh_seed(), kGpu);
  Tensor c = Tensor::empty({30, 20}, DType::f32, kGpu);
  const std::pair<Determinism, const char*> expected[] = {
      {Determinism::not_guaranteed, "cuda.split_k_atomic"},
      {Determinism::run_to_run, "cuda.cublas"},
      {Determinism::portable, "cuda.tiled"}};
  for (const auto& [level, name] : expected) {
    gemm(kN, kN, 1.0, a, b, 0.0, c, {.level = level});
    EXPECT_NE(last_explain().find(std::string("ran ") + name), std::string::npos) << last_explain();
  }
  // A strided operand: run_to_run falls back to the portable kernel.
  Tensor keep;
  TensorView as = testing::strided_copy(a, keep);
  gemm(kN, kN, 1.0, as, b, 0.0, c, {.level = Determinism::run_to_run});
  EXPECT_NE(last_explain().find("ran cuda.tiled"), std::string::npos) << last_explain();
}

TEST(GemmGpu, BadInputThrowsAndLeavesOutputUntouched) {
  SAMEBITS_REQUIRE_CUDA();
  Tensor a = testing::random_normal({4, 6}, DType::f32, fresh_seed(), kGpu);
  Tensor b = testing::random_normal({6, 5}, DType::f32, fresh_seed(), kGpu);
  Tensor b_cpu = b.to(Device::cpu());
  Tensor b64 = testing::random_normal({6, 5}, DType::f64, fresh_seed(), kGpu);
  Tensor bad_k = testing::random_normal({7, 5}, DType::f32, fresh_seed(), kGpu);
  Tensor c = testing::random_normal({4, 5}, DType::f32, fresh_seed(), kGpu);
  const auto before = content_hash(c);
  for (auto level : {Determinism::not_guaranteed, Determinism::run_to_run, Determinism::portable}) {
    const Options o{.level = level};
    EXPECT_THROW(gemm(kN, kN, 1.0, a, b_cpu, 1.0, c, o), InvalidArgument); // device
    EXPECT_THROW(gemm(kN, kN, 1.0, a, b64, 1.0, c, o), InvalidArgument);   // dtype
    EXPECT_THROW(gemm(kN, kN, 1.0, a, bad_k, 1.0, c, o), InvalidArgument); // k differs
    EXPECT_THROW(gemm(kN, kT, 1.0, a, b, 1.0, c, o), InvalidArgument);     // op(b) is [5, 6]
    EXPECT_EQ(content_hash(c), before);
  }
}

} // namespace
} // namespace samebits

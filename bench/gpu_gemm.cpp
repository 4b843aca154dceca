// GPU benchmarks of gemm, every CUDA variant: the shapes of GraphSAGE on Cora (forward, weight
// and input gradients), a square 4096^3 float32 product, and the synthetic large graph's
// [1M x 128] @ [128 x 128] with its weight gradient, and its second layer's [1M x 128] @ [128 x
// 16] and [1M x 16] @ [16 x 7] (the thin tiles, also against the wide and narrow ones in the
// tuning sweep). GFLOP/s (2mnk per call) in the note.
#include "core/tuning.hpp"
#include "gpu_common.hpp"
#include "ops/gemm.hpp"

#include <fmt/format.h>

namespace samebits::bench {

void bench_gemm_bf16(Report& r); // gpu_gemm_bf16.cpp: bf16 batch-invariant GEMM, accuracy

void bench_gemm(Report& r) {
  struct Case {
    const char* name;
    std::int64_t m, n, k;
    Transpose ta, tb;
    DType dtype;
    bool large;
  };
  const Transpose N = Transpose::no, T = Transpose::yes;
  const Case cases[] = {
      {"cora x@W1 [2708x1433]@[1433x16]", 2708, 16, 1433, N, N, DType::f32, false},
      {"cora x^T@dH [1433x2708]@[2708x16]", 1433, 16, 2708, T, N, DType::f32, false},
      {"cora h@W2 [2708x16]@[16x7]", 2708, 7, 16, N, N, DType::f32, false},
      {"cora h^T@dO [16x2708]@[2708x7]", 16, 7, 2708, T, N, DType::f32, false},
      {"cora dO@W2^T [2708x7]@[7x16]", 2708, 16, 7, N, T, DType::f32, false},
      {"4096^3 f32", 4096, 4096, 4096, N, N, DType::f32, true},
      {"4096^3 f64", 4096, 4096, 4096, N, N, DType::f64, true},
      {"graph [1M x 128]@[128x128]", 1 << 20, 128, 128, N, N, DType::f32, true},
      {"graph [1M x 128]@[128x16]", 1 << 20, 16, 128, N, N, DType::f32, true},
      {"graph [1M x 128]@[128x16] f64", 1 << 20, 16, 128, N, N, DType::f64, true},
      {"graph [1M x 128]@[128x32]", 1 << 20, 32, 128, N, N, DType::f32, true},
      {"graph h@W2 [1M x 16]@[16x7]", 1 << 20, 7, 16, N, N, DType::f32, true},
      {"graph x^T-stored [1M x 128]@[128x16]", 1 << 20, 16, 128, T, N, DType::f32, true},
      {"graph dW [128 x 1M]@[1M x 128]", 128, 128, 1 << 20, T, N, DType::f32, true},
      {"graph dW [128 x 1M]@[1M x 128] f64", 128, 128, 1 << 20, T, N, DType::f64, true},
      {"8192 x 8192 x 1024 f32", 8192, 8192, 1024, N, N, DType::f32, true},
  };
  for (const auto& c : cases) {
    if (r.quick && c.large)
      continue;
    Tensor a = c.ta == T ? gpu_normal({c.k, c.m}, c.dtype, 1) : gpu_normal({c.m, c.k}, c.dtype, 1);
    Tensor b = c.tb == T ? gpu_normal({c.n, c.k}, c.dtype, 2) : gpu_normal({c.k, c.n}, c.dtype, 2);
    Tensor out = Tensor::empty({c.m, c.n}, c.dtype, Device::cuda());
    const double elem = c.dtype == DType::f32 ? 4 : 8;
    const double bytes = elem * static_cast<double>(c.m * c.k + c.k * c.n + c.m * c.n);
    const double flops =
        2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
    for (const auto& v : list_variants("gemm")) {
      if (v.backend != DeviceType::cuda)
        continue;
      Options o{.level = v.level, .variant = v.name};
      try { // a variant that does not take this shape (cuda.tiled_small: large products) is left
            // out
        gemm(c.ta, c.tb, 1.0, a, b, 0.0, out, o);
      } catch (const InvalidArgument&) {
        continue;
      }
      const int reps = c.large ? 10 : 50;
      const double ms = time_ms([&] { gemm(c.ta, c.tb, 1.0, a, b, 0.0, out, o); }, reps, 3);
      r.add({"gemm", "gemm", c.name, v.name, std::string(to_string(v.level)), ms, bytes,
             fmt::format("{:.0f} GFLOP/s", flops / (ms * 1e-3) / 1e9)});
    }
  }
  // Launch tunings of the portable kernel on the target shapes (same bits; only the time moves).
  if (!r.quick) {
    struct Sweep {
      const char* name;
      std::int64_t m, n, k;
      Transpose ta;
      DType dtype;
      detail::GemmTuning t;
    };
    using detail::GemmTiles;
    constexpr auto kAuto = detail::CpuGemmIsa::automatic;
    constexpr auto kM8 = detail::GemmF64Mma::m8n8k4, kOff = detail::GemmF64Mma::off;
    const Sweep sweeps[] = {
        {"graph dW [128 x 1M]@[1M x 128]", 128, 128, 1 << 20, T, DType::f32, {GemmTiles::wide, 4}},
        {"graph dW [128 x 1M]@[1M x 128]", 128, 128, 1 << 20, T, DType::f32, {GemmTiles::wide, 16}},
        {"graph dW [128 x 1M]@[1M x 128]", 128, 128, 1 << 20, T, DType::f32, {GemmTiles::deep, 16}},
        {"graph dW [128 x 1M]@[1M x 128]", 128, 128, 1 << 20, T, DType::f32, {GemmTiles::deep, 64}},
        {"graph [1M x 128]@[128x16]", 1 << 20, 16, 128, N, DType::f32, {GemmTiles::thin, 0}},
        {"graph [1M x 128]@[128x16]", 1 << 20, 16, 128, N, DType::f32, {GemmTiles::wide, 0}},
        {"graph [1M x 128]@[128x16]", 1 << 20, 16, 128, N, DType::f32, {GemmTiles::narrow, 0}},
        {"graph h@W2 [1M x 16]@[16x7]", 1 << 20, 7, 16, N, DType::f32, {GemmTiles::thin, 0}},
        {"graph h@W2 [1M x 16]@[16x7]", 1 << 20, 7, 16, N, DType::f32, {GemmTiles::narrow, 0}},
        {"4096^3 f32", 4096, 4096, 4096, N, DType::f32, {GemmTiles::wide, 4}},
        {"4096^3 f64", 4096, 4096, 4096, N, DType::f64, {GemmTiles::wide, 4}},
        // float64 wide tiles on the FP64 tensor cores (automatic: m16n8k4 on sm_90), with the
        // older m8n8k4 instruction, and on the CUDA cores: the same bits
        {"4096^3 f64", 4096, 4096, 4096, N, DType::f64, {GemmTiles::wide, 4, kAuto, kM8}},
        {"4096^3 f64", 4096, 4096, 4096, N, DType::f64, {GemmTiles::wide, 4, kAuto, kOff}},
        {"graph dW [128 x 1M]@[1M x 128] f64",
         128,
         128,
         1 << 20,
         T,
         DType::f64,
         {GemmTiles::wide, 16}},
        {"graph dW [128 x 1M]@[1M x 128] f64",
         128,
         128,
         1 << 20,
         T,
         DType::f64,
         {GemmTiles::wide, 16, kAuto, kOff}},
    };
    for (const auto& w : sweeps) {
      Tensor a =
          w.ta == T ? gpu_normal({w.k, w.m}, w.dtype, 1) : gpu_normal({w.m, w.k}, w.dtype, 1);
      Tensor b = gpu_normal({w.k, w.n}, w.dtype, 2);
      Tensor out = Tensor::empty({w.m, w.n}, w.dtype, Device::cuda());
      const detail::TuningGuard<detail::GemmTuning> guard(w.t);
      const Options o{.level = Determinism::portable, .variant = "cuda.tiled"};
      const double ms = time_ms([&] { gemm(w.ta, N, 1.0, a, b, 0.0, out, o); }, 10, 2);
      const double flops =
          2.0 * static_cast<double>(w.m) * static_cast<double>(w.n) * static_cast<double>(w.k);
      r.add(
          {"gemm", "gemm_tuning", w.name, "cuda.tiled", "portable", ms, 0,
           fmt::format("{:.0f} GFLOP/s; {}", flops / (ms * 1e-3) / 1e9,
                       detail::choose_gemm_launch(w.m, w.n, w.k, w.dtype == DType::f32 ? 4 : 8, w.t)
                           .describe())});
    }
  }
  bench_gemm_bf16(r);
}

} // namespace samebits::bench

// GPU benchmarks of the batch-invariant bf16 GEMM (detail::PinnedHalfGemm: one cuBLASLt algorithm
// per weight shape, split-K off, the same for every m) against cuBLAS's own choice per m
// (cublasGemmEx, bf16 in and out, float32 accumulation), on the LLM shapes [m x 4096] @ [4096 x
// 4096] and [m x 4096] @ [4096 x 14336]; each row's note says whether row 0 kept its bits across
// every m of the sweep (the pinned algorithm's tile follows m for m <= 512: src/cuda/gemm_lt.cpp).
// Raw device buffers. Also the accuracy
// of the portable float32 GEMM against cuBLAS on long k (max error / sum |a||b|).
#include "cuda/gemm_cublas.hpp"
#include "gpu_common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cublas_v2.h>
#include <fmt/format.h>
#include <vector>

namespace samebits::bench {

namespace {

// count normal values rounded to dt (bfloat16 or float16), on the GPU.
Tensor normal_half(std::int64_t count, std::uint64_t seed, DType dt) {
  Tensor h = Tensor::empty({count}, dt, Device::cuda());
  convert(gpu_normal({count}, DType::f32, seed), h);
  return h;
}

std::vector<std::uint16_t> row0(const void* c, std::int64_t n) {
  std::vector<std::uint16_t> h(static_cast<std::size_t>(n));
  cudaMemcpy(h.data(), c, h.size() * 2, cudaMemcpyDeviceToHost);
  return h;
}

// bfloat16 on both LLM shapes, float16 on the first.
void bench_half(Report& r, DType dt) {
  const std::int64_t k = 4096, m_max = 8192;
  const std::int64_t ms_list[] = {1, 16, 64, 256, 1024, 4096, 8192};
  const Tensor ta = normal_half(m_max * k, 11, dt);
  const void* a = ta.view().data;
  cublasHandle_t h = detail::cublas_handle_for(0, nullptr);
  const cudaDataType_t type = dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const char* name = dt == DType::bf16 ? "bf16" : "f16";
  const std::vector<std::int64_t> ns =
      dt == DType::bf16 ? std::vector<std::int64_t>{4096, 14336} : std::vector<std::int64_t>{4096};
  for (std::int64_t n : ns) {
    const Tensor tw = normal_half(k * n, 12, dt),
                 tc = Tensor::empty({m_max, n}, dt, Device::cuda());
    const void* w = tw.view().data;
    void* c = tc.view().data;
    const detail::PinnedHalfGemm pinned(n, k, 4096, nullptr, dt);
    std::vector<std::uint16_t> ref_pinned, ref_blas;
    bool inv_pinned = true, inv_blas = true;
    std::vector<double> blas_ms; // per m of ms_list
    for (std::int64_t m : ms_list) {
      const float one = 1, zero = 0;
      auto blas = [&] {
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                     static_cast<int>(k), &one, w, type, static_cast<int>(n), a, type,
                     static_cast<int>(k), &zero, c, type, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
      };
      auto pin = [&] { pinned.run(a, w, c, m); };
      pin();
      cudaDeviceSynchronize();
      const auto rp = row0(c, n);
      blas();
      cudaDeviceSynchronize();
      const auto rb = row0(c, n);
      if (m == ms_list[0]) {
        ref_pinned = rp;
        ref_blas = rb;
      }
      inv_pinned = inv_pinned && rp == ref_pinned;
      inv_blas = inv_blas && rb == ref_blas;
      const int reps = m >= 4096 ? 20 : 50;
      const double t_pin = time_ms(pin, reps, 3), t_blas = time_ms(blas, reps, 3);
      blas_ms.push_back(t_blas);
      const double bytes = 2.0 * static_cast<double>(m * k + k * n + m * n);
      const double flops =
          2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
      const std::string shape = fmt::format("{} [{} x 4096]@[4096 x {}]", name, m, n);
      r.add({"gemm", "gemm_bf16", shape, "pinned cuBLASLt (batch-invariant)", "run_to_run", t_pin,
             bytes,
             fmt::format("{:.0f} GFLOP/s, {:.2f}x cuBLAS; {}", flops / (t_pin * 1e-3) / 1e9,
                         t_blas / t_pin, pinned.describe())});
      r.add({"gemm", "gemm_bf16", shape, "cublasGemmEx (heuristic per m)", "not_guaranteed", t_blas,
             bytes, fmt::format("{:.0f} GFLOP/s", flops / (t_blas * 1e-3) / 1e9)});
    }
    r.add({"gemm", "gemm_bf16", fmt::format("{} row 0 over m = 1..8192, n = {}", name, n),
           "pinned cuBLASLt (batch-invariant)", "run_to_run", 0, 0,
           inv_pinned ? "row 0 bitwise the same for every m" : "ROW 0 CHANGED WITH m"});
    r.add({"gemm", "gemm_bf16", fmt::format("{} row 0 over m = 1..8192, n = {}", name, n),
           "cublasGemmEx (heuristic per m)", "not_guaranteed", 0, 0,
           inv_blas ? "row 0 bitwise the same for every m" : "row 0 changed with m"});
  }
}

// Largest |error| / sum |a||b| of the portable kernel and of cuBLAS on [m x k] @ [k x n], over
// the first `rows` rows (the float64 reference is on the host). Small outputs make cuBLAS split k
// (short chains, small errors); large ones (2048 x 2048: more tiles than SMs) do not.
void bench_accuracy(Report& r) {
  struct Case {
    std::int64_t m, n, k, rows;
  };
  for (const Case cs :
       {Case{128, 128, 1031, 128}, Case{128, 128, 4096, 128}, Case{128, 128, 65536, 128},
        Case{2048, 2048, 1031, 32}, Case{2048, 2048, 4096, 32}}) {
    const std::int64_t m = cs.m, n = cs.n, k = cs.k;
    Tensor a = gpu_normal({m, k}, DType::f32, 21), b = gpu_normal({k, n}, DType::f32, 22);
    const auto av = a.to(Device::cpu()).to_vector<float>(),
               bv = b.to(Device::cpu()).to_vector<float>();
    std::vector<double> ref(static_cast<std::size_t>(cs.rows * n)), mag(ref.size());
    for (std::int64_t i = 0; i < cs.rows; ++i)
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = av[static_cast<std::size_t>(i * k + p)];
        for (std::int64_t j = 0; j < n; ++j) {
          const double prod = x * bv[static_cast<std::size_t>(p * n + j)];
          ref[static_cast<std::size_t>(i * n + j)] += prod;
          mag[static_cast<std::size_t>(i * n + j)] += std::abs(prod);
        }
      }
    for (const char* v : {"cuda.tiled", "cuda.cublas"}) {
      Tensor c = Tensor::empty({m, n}, DType::f32, Device::cuda());
      const Determinism level =
          std::string(v) == "cuda.tiled" ? Determinism::portable : Determinism::run_to_run;
      gemm(Transpose::no, Transpose::no, 1.0, a, b, 0.0, c, {.level = level, .variant = v});
      const auto got = c.to(Device::cpu()).to_vector<float>();
      double worst = 0;
      for (std::size_t e = 0; e < ref.size(); ++e)
        worst = std::max(worst, std::abs(got[e] - ref[e]) / mag[e]);
      r.add({"gemm", "gemm_accuracy", fmt::format("f32 [{} x {}]@[{} x {}]", m, k, k, n), v,
             std::string(to_string(level)), 0, 0,
             fmt::format("max |err| / sum|a||b| = {:.3g} (first {} rows)", worst, cs.rows)});
    }
  }
}

} // namespace

void bench_gemm_bf16(Report& r) {
  bench_accuracy(r);
  if (r.quick)
    return;
  try {
    bench_half(r, DType::bf16);
    bench_half(r, DType::f16);
  } catch (const std::exception& e) { // the other rows still count
    r.add({"gemm", "gemm_bf16", "bf16 LLM shapes", "pinned cuBLASLt (batch-invariant)",
           "run_to_run", 0, 0, std::string("FAILED: ") + e.what()});
    std::fprintf(stderr, "bf16 GEMM benchmark failed: %s\n", e.what());
  }
}

} // namespace samebits::bench

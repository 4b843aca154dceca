// A probe for the portable float64 GEMM (family "probe", `--only probe`): does the FP64 tensor-core
// instruction (mma.sync m8n8k4 .f64) compute each output as the chain of four correctly rounded
// fused multiply-adds in ascending k, c = fma(a3, b3, fma(a2, b2, fma(a1, b1, fma(a0, b0, c)))),
// which is the canonical order's step (include/samebits/ops/gemm.hpp)? If it does, the portable
// GEMM can run its float64 chains on the tensor cores with the CPU's bits. The probe first checks
// the fragment layout with small integers (every order gives the same exact result), then counts
// the outputs equal to the ascending chain, to the descending chain, and to neither, on operands
// whose exponents spread over 2^-20..2^20 so that the order shows.
#include "gpu_common.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace samebits::bench {

namespace {

// One warp per problem: a is 8 x 4 (row-major), b 4 x 8 (column-major: b[col * 4 + k]), c and d
// 8 x 8 (row-major), 32, 32 and 64 doubles per problem.
__global__ void dmma_kernel(const double* a, const double* b, const double* c, double* d) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const long long w = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int group = lane >> 2, tig = lane & 3;
  const double av = a[w * 32 + group * 4 + tig];
  const double bv = b[w * 32 + group * 4 + tig]; // column `group`, row k = tig
  const double c0 = c[w * 64 + group * 8 + 2 * tig], c1 = c[w * 64 + group * 8 + 2 * tig + 1];
  double d0 = 0, d1 = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%4, %5};"
               : "=d"(d0), "=d"(d1)
               : "d"(av), "d"(bv), "d"(c0), "d"(c1));
#endif
  d[w * 64 + group * 8 + 2 * tig] = d0;
  d[w * 64 + group * 8 + 2 * tig + 1] = d1;
}

// The two chains of fmas per output, ascending and descending k.
__global__ void chain_kernel(const double* a, const double* b, const double* c, double* up,
                             double* down, long long problems) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= problems * 64)
    return;
  const long long w = e / 64;
  const int row = static_cast<int>(e % 64) / 8, col = static_cast<int>(e % 8);
  double u = c[e], v = c[e];
  for (int k = 0; k < 4; ++k)
    u = __fma_rn(a[w * 32 + row * 4 + k], b[w * 32 + col * 4 + k], u);
  for (int k = 3; k >= 0; --k)
    v = __fma_rn(a[w * 32 + row * 4 + k], b[w * 32 + col * 4 + k], v);
  up[e] = u;
  down[e] = v;
}

void launch_dmma(const double* a, const double* b, const double* c, double* d, long long problems) {
  dmma_kernel<<<static_cast<unsigned>(problems / 4), 128>>>(a, b, c, d);
}

std::vector<double> operands(std::size_t n, bool integers, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-20, 20), small(-8, 8), sign(0, 1);
  std::vector<double> v(n);
  for (auto& x : v)
    x = integers ? small(rng) : (sign(rng) ? -1 : 1) * std::ldexp(unit(rng), exponent(rng));
  return v;
}

struct Counts {
  long long outputs = 0, ascending = 0, descending = 0, neither = 0;
};

Counts probe(long long problems, bool integers, std::uint64_t seed, double* ms) {
  std::mt19937_64 rng(seed);
  const auto ha = operands(problems * 32, integers, rng),
             hb = operands(problems * 32, integers, rng),
             hc = operands(problems * 64, integers, rng);
  Tensor a = Tensor::from_vector(ha, {problems * 32}).to(Device::cuda());
  Tensor b = Tensor::from_vector(hb, {problems * 32}).to(Device::cuda());
  Tensor c = Tensor::from_vector(hc, {problems * 64}).to(Device::cuda());
  Tensor d = Tensor::empty({problems * 64}, DType::f64, Device::cuda());
  Tensor up = Tensor::empty({problems * 64}, DType::f64, Device::cuda());
  Tensor down = Tensor::empty({problems * 64}, DType::f64, Device::cuda());
  // The instruction's own time (one launch, after a warm-up): 192 doubles move per problem.
  launch_dmma(a.data<double>(), b.data<double>(), c.data<double>(), d.data<double>(), problems);
  EventTimer timer;
  timer.start();
  launch_dmma(a.data<double>(), b.data<double>(), c.data<double>(), d.data<double>(), problems);
  *ms = timer.stop_ms();
  chain_kernel<<<static_cast<unsigned>((problems * 64 + 255) / 256), 256>>>(
      a.data<double>(), b.data<double>(), c.data<double>(), up.data<double>(), down.data<double>(),
      problems);
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    throw std::runtime_error(std::string("the probe's kernels failed: ") + cudaGetErrorString(e));
  const auto hd = d.to_vector<double>(), hu = up.to_vector<double>(), hw = down.to_vector<double>();
  Counts n;
  for (std::size_t i = 0; i < hd.size(); ++i) {
    ++n.outputs;
    const bool asc = std::memcmp(&hd[i], &hu[i], 8) == 0;
    const bool desc = std::memcmp(&hd[i], &hw[i], 8) == 0;
    n.ascending += asc;
    n.descending += desc;
    n.neither += !asc && !desc;
  }
  return n;
}

} // namespace

void bench_dmma_probe(Report& r) {
  const long long problems = r.quick ? 1024 : 65536; // warps, a multiple of 4
  double ms = 0;
  Counts layout, spread;
  try {
    layout = probe(problems, true, 11, &ms);
    spread = probe(problems, false, 12, &ms);
  } catch (const std::exception& e) {
    std::printf("dmma probe: %s\n", e.what());
    r.add({"probe", "mma.sync m8n8k4 f64", "", "tensor core", "-", 0, 0, e.what()});
    return;
  }
  using std::to_string;
  const std::string note =
      layout.ascending != layout.outputs
          ? "fragment layout wrong, or no FP64 mma on this architecture: " +
                to_string(layout.ascending) + " of " + to_string(layout.outputs) +
                " small-integer outputs exact"
          : "of " + to_string(spread.outputs) + " outputs: " + to_string(spread.ascending) +
                " equal the ascending fma chain, " + to_string(spread.descending) +
                " the descending one, " + to_string(spread.neither) +
                " neither (layout checked on small integers)";
  std::printf("dmma probe: %s\n", note.c_str());
  r.add({"probe", "mma.sync m8n8k4 f64", to_string(problems) + " problems of 8x8x4", "tensor core",
         "-", ms, 8.0 * 192 * static_cast<double>(problems), note});
}

} // namespace samebits::bench

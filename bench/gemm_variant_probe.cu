// The wide float GEMM kernel of one variant (bench/gemm_variants.py; its src/ comes first on the
// include path) on 4096^3 against cublasSgemm (FP32, no TF32) with its output hash, then the same
// for the kernel that copies its tiles asynchronously (src/cuda/gemm_copy_tiles.cuh, as the
// variant's src/ has it) at several step depths, stage counts and tile heights, then the largest
// error over sum|a||b| on [128 x k] @ [k x 128] for k = 1031 and 4096 beside cuBLAS's. NOACC=1
// skips the accuracy part, REPS sets the timed repeats (best and mean of them are printed).
#include "cuda/gemm_copy_tiles.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <random>
#include <vector>
using namespace samebits::detail;
using namespace samebits::detail::cuda_gemm;
#ifndef SMEM_DYN
#define SMEM_DYN 0
#endif
#define CK(x)                                                                                      \
  do {                                                                                             \
    auto e_ = (x);                                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      printf("cuda %s line %d\n", cudaGetErrorString(e_), __LINE__);                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
// A [m x k] @ [k x n] problem: normal operands on the host and the device, C for the kernel, D
// for cuBLAS.
struct Problem {
  long m, n, k;
  std::vector<float> ha, hb;
  float *A = nullptr, *B = nullptr, *C = nullptr, *D = nullptr;
  Problem(long m_, long n_, long k_, std::mt19937_64& g, std::normal_distribution<float>& nd)
      : m(m_), n(n_), k(k_), ha(m_ * k_), hb(k_ * n_) {
    for (auto& x : ha)
      x = nd(g);
    for (auto& x : hb)
      x = nd(g);
    CK(cudaMalloc(&A, m * k * 4));
    CK(cudaMalloc(&B, k * n * 4));
    CK(cudaMalloc(&C, m * n * 4));
    CK(cudaMalloc(&D, m * n * 4));
    CK(cudaMemcpy(A, ha.data(), m * k * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), k * n * 4, cudaMemcpyHostToDevice));
  }
  ~Problem() {
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaFree(D);
  }
  // The variant's gemm_tiles, or gemm_copy_tiles<BK, S, BM> (its dynamic shared memory allowed
  // by main's copy_variant).
  void ours() const {
    using Cfg = WideFloatTiles;
    dim3 grid((m + 127) / 128, (n + 127) / 128, 1);
    gemm_tiles<float, Cfg><<<grid, kThreads<Cfg>, SMEM_DYN, 0>>>(
        Mat<float>{A, k, 1}, Mat<float>{B, n, 1}, C, n, 1, 0, m, n, k, chunk(),
        Epilogue<float>{1.f, 0.f}, TileOut::final_c);
  }
  template <int BK, int S, int BM> void copy() const {
    dim3 grid((m + BM - 1) / BM, (n + 127) / 128, 1);
    gemm_copy_tiles<BK, S, BM><<<grid, kCopyThreadsOf<BM>, copy_tiles_smem<BK, S, BM>(), 0>>>(
        Mat<float>{A, k, 1}, Mat<float>{B, n, 1}, C, n, 1, 0, m, n, k, chunk(),
        Epilogue<float>{1.f, 0.f}, TileOut::final_c);
  }
  long chunk() const { return ((k + kGemmBlockK - 1) / kGemmBlockK) * kGemmBlockK; }
  void cublas(cublasHandle_t h) const { // row-major C = A B as column-major C^T = B^T A^T
    const float one = 1, zero = 0;
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k, &zero, D, n);
  }
};

// One configuration of gemm_copy_tiles: k per step, steps in flight, tile rows.
template <int BK, int S, int BM> struct CopyConfig {};

struct Times {
  float best = 1e9, mean = 0;
};

// Three warm-up calls, then `reps` calls timed one by one with events.
template <class F> Times time_calls(F call, int reps) {
  for (int i = 0; i < 3; ++i)
    call();
  CK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  Times t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0);
    call();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    t.best = std::min(t.best, ms);
    t.mean += ms / reps;
  }
  CK(cudaGetLastError());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return t;
}

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "?";
  if (SMEM_DYN)
    CK(cudaFuncSetAttribute(gemm_tiles<float, WideFloatTiles>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_DYN));
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  std::mt19937_64 g(7);
  std::normal_distribution<float> nd;
  // 4096^3: the variant's gemm_tiles, then gemm_copy_tiles at several step depths and stage
  // counts, each against cuBLAS in turn.
  const Problem big(4096, 4096, 4096, g, nd);
  auto time_big = [&](const char* label, auto call) {
    const int reps = getenv("REPS") ? atoi(getenv("REPS")) : 20;
    const Times t = time_calls(call, reps);
    const Times b = time_calls([&] { big.cublas(h); }, reps);
    std::vector<unsigned> hc(big.m * big.n);
    CK(cudaMemcpy(hc.data(), big.C, hc.size() * 4, cudaMemcpyDeviceToHost));
    unsigned long long hsh = 1469598103934665603ull;
    for (unsigned v : hc) {
      hsh ^= v;
      hsh *= 1099511628211ull;
    }
    printf("%-10s 4096^3 %-9s %.4f ms (mean %.4f)  cublas %.4f ms (mean %.4f)  ratio(best) %.3fx  "
           "hash %016llx\n",
           name, label, t.best, t.mean, b.best, b.mean, b.best / t.best, hsh);
  };
  time_big("ours", [&] { big.ours(); });
  // gemm_copy_tiles<BK, S, BM> for each (step depth, stages, tile rows) of the list.
  auto copy_variant = [&]<int BK, int S, int BM>(CopyConfig<BK, S, BM>) {
    CK(cudaFuncSetAttribute(gemm_copy_tiles<BK, S, BM>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            copy_tiles_smem<BK, S, BM>()));
    char label[32];
    snprintf(label, sizeof label, "copy%d/%d/%d", BK, S, BM);
    time_big(label, [&] { big.template copy<BK, S, BM>(); });
  };
  [&]<class... C>(C... configs) {
    (copy_variant(configs), ...);
  }(CopyConfig<16, 3, 128>{}, CopyConfig<32, 3, 128>{}, CopyConfig<8, 4, 128>{});
  if (getenv("NOACC"))
    return 0;
  for (long k : {1031L, 4096L}) {
    std::mt19937_64 g2(k);
    const Problem p(128, 128, k, g2, nd);
    const long m = p.m, n = p.n;
    p.ours();
    p.cublas(h);
    CK(cudaDeviceSynchronize());
    std::vector<float> hc(m * n), hd(m * n);
    CK(cudaMemcpy(hc.data(), p.C, m * n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hd.data(), p.D, m * n * 4, cudaMemcpyDeviceToHost));
    double w1 = 0, w2 = 0;
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < n; ++j) {
        double r = 0, mg = 0;
        for (long p2 = 0; p2 < k; ++p2) {
          double pr = (double)p.ha[i * k + p2] * p.hb[p2 * n + j];
          r += pr;
          mg += std::fabs(pr);
        }
        w1 = std::max(w1, std::fabs(hc[i * n + j] - r) / mg);
        w2 = std::max(w2, std::fabs(hd[i * n + j] - r) / mg);
      }
    printf("%-10s accuracy 128x%ldx128: ours %.3g cublas %.3g\n", name, k, w1, w2);
  }
  return 0;
}

// The wide float GEMM kernel of one variant (bench/gemm_variants.py; its src/ comes first on the
// include path) on 4096^3 against cublasSgemm (FP32, no TF32), its output hash, and its largest
// error over sum|a||b| on [128 x k] @ [k x 128] for k = 1031 and 4096 beside cuBLAS's. NOACC=1
// skips the accuracy part, REPS sets the timed repeats (best and mean of them are printed).
#include "cuda/gemm_kernels.cuh"

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
static void launch(const float* A, const float* B, float* C, long m, long n, long k,
                   cudaStream_t s) {
  using Cfg = WideFloatTiles;
  dim3 grid((m + 127) / 128, (n + 127) / 128, 1);
  long chunk = ((k + 255) / 256) * 256;
  gemm_tiles<float, Cfg><<<grid, kThreads<Cfg>, SMEM_DYN, s>>>(
      Mat<float>{A, k, 1}, Mat<float>{B, n, 1}, C, n, 1, 0, m, n, k, chunk,
      Epilogue<float>{1.f, 0.f}, TileOut::final_c);
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
  { // timing 4096^3
    const long N = 4096;
    std::vector<float> ha(N * N), hb(N * N);
    for (auto& x : ha)
      x = nd(g);
    for (auto& x : hb)
      x = nd(g);
    float *A, *B, *C, *D;
    CK(cudaMalloc(&A, N * N * 4));
    CK(cudaMalloc(&B, N * N * 4));
    CK(cudaMalloc(&C, N * N * 4));
    CK(cudaMalloc(&D, N * N * 4));
    CK(cudaMemcpy(A, ha.data(), N * N * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), N * N * 4, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    int reps = getenv("REPS") ? atoi(getenv("REPS")) : 20;
    for (int i = 0; i < 3; ++i)
      launch(A, B, C, N, N, N, 0);
    CK(cudaDeviceSynchronize());
    float best = 1e9, tot = 0;
    for (int i = 0; i < reps; ++i) {
      cudaEventRecord(e0);
      launch(A, B, C, N, N, N, 0);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      best = std::min(best, ms);
      tot += ms;
    }
    CK(cudaGetLastError());
    const float one = 1, zero = 0;
    for (int i = 0; i < 3; ++i)
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, B, N, A, N, &zero, D, N);
    float bbest = 1e9, btot = 0;
    for (int i = 0; i < reps; ++i) {
      cudaEventRecord(e0);
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, B, N, A, N, &zero, D, N);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      bbest = std::min(bbest, ms);
      btot += ms;
    }
    std::vector<unsigned> hc(N * N);
    CK(cudaMemcpy(hc.data(), C, N * N * 4, cudaMemcpyDeviceToHost));
    unsigned long long hsh = 1469598103934665603ull;
    for (unsigned v : hc) {
      hsh ^= v;
      hsh *= 1099511628211ull;
    }
    printf("%-10s 4096^3 ours %.4f ms (mean %.4f)  cublas %.4f ms (mean %.4f)  ratio(best) %.3fx  "
           "hash %016llx\n",
           name, best, tot / reps, bbest, btot / reps, bbest / best, hsh);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaFree(D);
  }
  if (getenv("NOACC"))
    return 0;
  for (long k : {1031L, 4096L}) {
    const long m = 128, n = 128;
    std::mt19937_64 g2(k);
    std::vector<float> ha(m * k), hb(k * n);
    for (auto& x : ha)
      x = nd(g2);
    for (auto& x : hb)
      x = nd(g2);
    float *A, *B, *C, *D;
    CK(cudaMalloc(&A, m * k * 4));
    CK(cudaMalloc(&B, k * n * 4));
    CK(cudaMalloc(&C, m * n * 4));
    CK(cudaMalloc(&D, m * n * 4));
    CK(cudaMemcpy(A, ha.data(), m * k * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), k * n * 4, cudaMemcpyHostToDevice));
    launch(A, B, C, m, n, k, 0);
    const float one = 1, zero = 0;
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k, &zero, D, n);
    CK(cudaDeviceSynchronize());
    std::vector<float> hc(m * n), hd(m * n);
    CK(cudaMemcpy(hc.data(), C, m * n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hd.data(), D, m * n * 4, cudaMemcpyDeviceToHost));
    double w1 = 0, w2 = 0;
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < n; ++j) {
        double r = 0, mg = 0;
        for (long p = 0; p < k; ++p) {
          double pr = (double)ha[i * k + p] * hb[p * n + j];
          r += pr;
          mg += std::fabs(pr);
        }
        w1 = std::max(w1, std::fabs(hc[i * n + j] - r) / mg);
        w2 = std::max(w2, std::fabs(hd[i * n + j] - r) / mg);
      }
    printf("%-10s accuracy 128x%ldx128: ours %.3g cublas %.3g\n", name, k, w1, w2);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaFree(D);
  }
  return 0;
}

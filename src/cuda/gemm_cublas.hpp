// gemm's cuBLAS-backed CUDA variants (src/cuda/gemm_cublas.cu) and the pinned cuBLASLt bf16/f16
// GEMM (src/cuda/gemm_lt.cpp), declared for src/cuda/gemm.cu, the tests and the benchmarks.
#pragma once
#include "core/registry.hpp"
#include "ops/gemm.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct cublasContext;

namespace samebits::detail {

// cuda.cublas: cublasSgemm/Dgemm, and why it cannot take some operands (empty: it can).
void run_cublas(const GemmArgs& g, const Workspace& ws);
std::string cublas_why_not(const GemmArgs& g);
// The cuBLAS handle cuda.cublas uses on (device, stream), with its fixed workspace (for the
// benchmarks' bf16 reference calls).
cublasContext* cublas_handle_for(int device, void* stream);

// A batch-invariant bf16 or f16 GEMM (float32 accumulation, output in the input dtype) for
// inference on raw device buffers, row-major: c[m x n] = a[m x k] @ w[k x n]. One cuBLASLt
// algorithm is chosen once per (n, k) and then used for every m, with split-K off
// (CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 1, no reduction scheme) and a fixed small workspace, so each
// output element is one tile's k loop, whose order does not depend on m: a row's bits do not depend
// on how many rows come with it (the test and the benchmark check this on the GPU; cuBLASLt does
// not document it). The choice (made at construction) is the first of cuBLASLt's heuristic
// candidates (for m = m_ref, then a few other m) that runs every m, those with 128 x 128 tiles
// before the others: a fixed rule, never a timing, so every process on the same GPU and library
// picks the same algorithm. For m <= 512 the same algorithm may run with another of its tiles, the
// fastest of a short list by timing among those whose rows are bitwise the pinned tile's (checked
// at construction on random operands): the choice moves the speed, not the bits
// (src/cuda/gemm_lt.cpp). Construction allocates n x k + 256 x (n + k) 2-byte values for that check
// for a few milliseconds. Not thread-safe; one stream at a time.
class PinnedHalfGemm {
public:
  // dtype: of a, w and c, bfloat16 or float16 (else InvalidArgument).
  PinnedHalfGemm(std::int64_t n, std::int64_t k, std::int64_t m_ref, void* stream = nullptr,
                 DType dtype = DType::bf16);
  ~PinnedHalfGemm();
  PinnedHalfGemm(const PinnedHalfGemm&) = delete;
  PinnedHalfGemm& operator=(const PinnedHalfGemm&) = delete;
  // Throws CudaError when the pinned algorithm cannot run this m.
  void run(const void* a, const void* w, void* c, std::int64_t m) const;
  std::string describe() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace samebits::detail

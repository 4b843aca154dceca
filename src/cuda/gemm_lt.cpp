// The pinned cuBLASLt bf16 GEMM (src/cuda/gemm_cublas.hpp): one algorithm per weight shape, split-K
// off, no workspace, the same for every m, so that a row's bits do not depend on the batch.
//
// Row-major c[m x n] = a[m x k] @ w[k x n] is, in cuBLASLt's column-major terms, c^T = w^T a^T:
// an (n x m) result from w as an n x k matrix (ld n) and a as k x m (ld k). m is the column count
// of that result, so batch invariance means the per-column work must not depend on how many
// columns there are: a fixed tile kernel with the whole k loop per tile gives that; split-K and
// the heuristics' choice per m do not.
#include "cuda/check.cuh"
#include "cuda/gemm_cublas.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <vector>

namespace samebits::detail {

namespace {

void check_lt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("cuBLASLt call failed: ") + what + ": " +
                    cublasGetStatusString(st));
}

} // namespace

struct PinnedBf16Gemm::Impl {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lw = nullptr; // w: n x k, column-major view
  cublasLtMatmulAlgo_t algo{};
  std::int64_t n = 0, k = 0;
  cudaStream_t stream = nullptr;
  // cuBLASLt's Hopper kernels ask for a few bytes of workspace even without split-K (run 2 of
  // bench/results/gemm-2026-12-01.json: 4 bytes for algo 66): a fixed buffer, the same for every m.
  static constexpr std::size_t kWorkspace = std::size_t{1} << 20;
  void* workspace = nullptr;
  int algo_id = -1, tile = -1, stages = -1;

  // Layouts of a (k x m) and c (n x m) for this m; the caller destroys them.
  void layouts(std::int64_t m, cublasLtMatrixLayout_t& la, cublasLtMatrixLayout_t& lc) const {
    check_lt(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, static_cast<std::uint64_t>(k),
                                        static_cast<std::uint64_t>(m), k),
             "layout a");
    check_lt(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, static_cast<std::uint64_t>(n),
                                        static_cast<std::uint64_t>(m), n),
             "layout c");
  }

  cublasStatus_t matmul(const cublasLtMatmulAlgo_t& al, const void* a, const void* w, void* c,
                        std::int64_t m) const {
    cublasLtMatrixLayout_t la, lc;
    layouts(m, la, lc);
    const float one = 1, zero = 0;
    const cublasStatus_t st =
        cublasLtMatmul(lt, op, &one, w, lw, a, la, &zero, c, lc, c, lc, &al, nullptr, 0, stream);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lc);
    return st;
  }

  // Empty when the algorithm runs every m of the sweep without workspace; else what failed.
  std::string fails_at(const cublasLtMatmulAlgo_t& al) const {
    for (std::int64_t m : {1, 2, 3, 8, 17, 64, 100, 1000, 4096, 8192}) {
      cublasLtMatrixLayout_t la, lc;
      layouts(m, la, lc);
      cublasLtMatmulHeuristicResult_t r{};
      const cublasStatus_t st = cublasLtMatmulAlgoCheck(lt, op, lw, la, lc, lc, &al, &r);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lc);
      if (st != CUBLAS_STATUS_SUCCESS)
        return fmt::format("check at m = {}: {}", m, cublasGetStatusString(st));
      if (r.workspaceSize > kWorkspace)
        return fmt::format("m = {} needs {} bytes of workspace", m, r.workspaceSize);
    }
    return {};
  }
};

PinnedBf16Gemm::PinnedBf16Gemm(std::int64_t n, std::int64_t k, std::int64_t m_ref, void* stream)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.n = n, s.k = k, s.stream = static_cast<cudaStream_t>(stream);
  check_lt(cublasLtCreate(&s.lt), "cublasLtCreate");
  check_lt(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t nop = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &nop, sizeof nop),
           "transa");
  check_lt(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop),
           "transb");
  check_lt(cublasLtMatrixLayoutCreate(&s.lw, CUDA_R_16BF, static_cast<std::uint64_t>(n),
                                      static_cast<std::uint64_t>(k), n),
           "layout w");
  cublasLtMatmulPreference_t pref;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const std::size_t workspace_bytes = Impl::kWorkspace;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof workspace_bytes),
           "preference workspace");
  SAMEBITS_CUDA_CHECK(cudaMalloc(&s.workspace, Impl::kWorkspace));
  // Candidates: cuBLASLt's heuristic choices for a few m (m_ref first), within the workspace.
  std::vector<cublasLtMatmulHeuristicResult_t> cand;
  for (std::int64_t m : {m_ref, std::int64_t{1}, std::int64_t{64}, std::int64_t{1024}}) {
    cublasLtMatrixLayout_t la, lc;
    s.layouts(m, la, lc);
    std::vector<cublasLtMatmulHeuristicResult_t> got(16);
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(s.lt, s.op, s.lw, la, lc, lc, pref,
                                       static_cast<int>(got.size()), got.data(),
                                       &found) == CUBLAS_STATUS_SUCCESS)
      cand.insert(cand.end(), got.begin(), got.begin() + found);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lc);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // The first candidate that runs every m without split-K and within the workspace, in the
  // heuristic's order, those with 128 x 128 tiles first: not the fastest by timing, a choice that
  // can differ between processes, and with it the bits. On an H200 128 x 128 tiles ran 1.0-1.1x
  // cuBLAS's own choice for m >= 1024 and 0.57-0.84x for m <= 64, where the heuristic's first
  // (256 x 128) ran 0.37-0.49x (bench/results/partial-run133-h200/gpu_bench_gemm.json).
  std::string why; // what each rejected candidate failed on, for the error message
  bool found = false;
  for (std::size_t pass = 0; pass < 2 * cand.size() && !found; ++pass) {
    const std::size_t i = pass % cand.size();
    if (cand[i].state != CUBLAS_STATUS_SUCCESS)
      continue;
    cublasLtMatmulAlgo_t al = cand[i].algo;
    int id = -1, splits = 1, tile = -1;
    std::size_t got = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&al, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile,
                                         &got);
    if ((pass < cand.size()) != (tile == CUBLASLT_MATMUL_TILE_128x128))
      continue; // 128 x 128 tiles in the first pass, the others in the second
    cublasLtMatmulAlgoConfigGetAttribute(&al, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &got);
    cublasLtMatmulAlgoConfigGetAttribute(&al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                         sizeof splits, &got);
    if (splits != 1) { // split-K makes the order depend on the launch: turn it off
      const int one = 1;
      const std::uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
      if (cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one,
                                               sizeof one) != CUBLAS_STATUS_SUCCESS ||
          cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none,
                                               sizeof none) != CUBLAS_STATUS_SUCCESS) {
        why += fmt::format(" [algo {}: split-K {} cannot be turned off]", id, splits);
        continue;
      }
    }
    const std::string fails = s.fails_at(al);
    if (!fails.empty()) {
      why += fmt::format(" [algo {}: {}]", id, fails);
      continue;
    }
    s.algo = al;
    found = true;
  }
  if (!found)
    throw CudaError(fmt::format("cuBLASLt offers no split-K-free bf16 algorithm that runs every m "
                                "for n = {}, k = {} ({} candidates:{})",
                                n, k, cand.size(), why));
  std::size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&s.algo, CUBLASLT_ALGO_CONFIG_ID, &s.algo_id,
                                       sizeof s.algo_id, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&s.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &s.tile,
                                       sizeof s.tile, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&s.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &s.stages,
                                       sizeof s.stages, &got);
}

PinnedBf16Gemm::~PinnedBf16Gemm() {
  if (!impl_)
    return;
  cudaFree(impl_->workspace);
  cublasLtMatrixLayoutDestroy(impl_->lw);
  cublasLtMatmulDescDestroy(impl_->op);
  cublasLtDestroy(impl_->lt);
}

void PinnedBf16Gemm::run(const void* a, const void* w, void* c, std::int64_t m) const {
  check_lt(impl_->matmul(impl_->algo, a, w, c, m), "cublasLtMatmul (pinned algorithm)");
}

namespace {

// The pinned algorithm with another tile, or nothing when cuBLASLt refuses the combination.
bool with_tile(const cublasLtMatmulAlgo_t& pinned, int tile, cublasLtMatmulAlgo_t& out) {
  out = pinned;
  return cublasLtMatmulAlgoConfigSetAttribute(&out, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                              sizeof tile) == CUBLAS_STATUS_SUCCESS;
}

} // namespace

std::vector<int> PinnedBf16Gemm::sibling_tiles() const {
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&impl_->algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0,
                                        &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes == 0)
    return {};
  std::vector<int> ids(bytes / sizeof(int));
  std::size_t got = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&impl_->algo, CUBLASLT_ALGO_CAP_TILE_IDS, ids.data(),
                                        ids.size() * sizeof(int), &got) != CUBLAS_STATUS_SUCCESS)
    return {};
  std::vector<int> out;
  for (int tile : ids) {
    cublasLtMatmulAlgo_t al;
    if (tile != impl_->tile && tile != CUBLASLT_MATMUL_TILE_UNDEFINED &&
        with_tile(impl_->algo, tile, al) && impl_->fails_at(al).empty())
      out.push_back(tile);
  }
  return out;
}

void PinnedBf16Gemm::run_with_tile(int tile, const void* a, const void* w, void* c,
                                   std::int64_t m) const {
  cublasLtMatmulAlgo_t al;
  if (!with_tile(impl_->algo, tile, al))
    throw CudaError(fmt::format("cuBLASLt refuses tile {} for algo {}", tile, impl_->algo_id));
  check_lt(impl_->matmul(al, a, w, c, m), "cublasLtMatmul (pinned algorithm, another tile)");
}

std::string PinnedBf16Gemm::describe() const {
  return fmt::format("cuBLASLt algo {} tile {} stages {}, split-K 1, fixed 1 MiB workspace",
                     impl_->algo_id, impl_->tile, impl_->stages);
}

} // namespace samebits::detail

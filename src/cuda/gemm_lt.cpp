// The pinned cuBLASLt bf16/f16 GEMM (src/cuda/gemm_cublas.hpp): one algorithm per weight shape,
// split-K off, no workspace, the same for every m, so that a row's bits do not depend on the batch.
//
// The tile may follow m. On an H200 every one of the 131 other tiles the pinned algorithm offers
// gave row 0 the pinned tile's bits at every m from 1 to 8192, for n = 4096 and 14336 (run 139,
// bench/results/run139): the k loop and the instruction stay, only the cut of the output into
// thread blocks moves. The 128 x 128 tile runs 0.61-0.93x cuBLAS at m <= 256 and a smaller one
// 0.90-1.14x there, so the constructor times a short list of tiles at m = 1, 16, 64 and 256 and
// keeps, for each, the fastest whose rows are bitwise the pinned tile's on the same random
// operands (those that differ are never used). Timing picks only among tiles with the same bits,
// so the choice moves the speed, never a result. Larger m keep the pinned tile (1.0-1.1x).
//
// Row-major c[m x n] = a[m x k] @ w[k x n] is, in cuBLASLt's column-major terms, c^T = w^T a^T:
// an (n x m) result from w as an n x k matrix (ld n) and a as k x m (ld k). m is the column count
// of that result, so batch invariance means the per-column work must not depend on how many
// columns there are: a fixed tile kernel with the whole k loop per tile gives that; split-K and
// the heuristics' choice per m do not.
#include "cuda/check.cuh"
#include "cuda/gemm_cublas.hpp"
#include "samebits/random.hpp"

#include <algorithm>
#include <array>
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

// The m of each tuned bucket and the bucket of an m (-1: the pinned tile).
constexpr std::array<std::int64_t, 4> kTunedM = {1, 16, 64, 256};
int bucket_of(std::int64_t m) {
  return m <= 4 ? 0 : m <= 32 ? 1 : m <= 128 ? 2 : m <= 512 ? 3 : -1;
}
// Tiles tried for small m: those that were the fastest at some m <= 256 on an H200 (run 139), of
// every shape family (64 x 8, 64 x 32, 64 x 64, 128 x 64, 256 x 64 and the wide ones).
constexpr int kTileShortlist[] = {10, 13, 15, 18, 21, 312, 395, 487, 515};

} // namespace

struct PinnedHalfGemm::Impl {
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
  DType dtype = DType::bf16; // of a, w and c: bfloat16 or float16
  cudaDataType_t type() const { return dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F; }
  // The algorithm and tile of each bucket of small m (bucket_of); the pinned one until tuned.
  std::array<cublasLtMatmulAlgo_t, kTunedM.size()> by_m{};
  std::array<int, kTunedM.size()> tile_by_m{};

  const cublasLtMatmulAlgo_t& algo_for(std::int64_t m) const {
    const int b = bucket_of(m);
    return b < 0 ? algo : by_m[static_cast<std::size_t>(b)];
  }
  void tune_small_m();

  // Layouts of a (k x m) and c (n x m) for this m; the caller destroys them.
  void layouts(std::int64_t m, cublasLtMatrixLayout_t& la, cublasLtMatrixLayout_t& lc) const {
    check_lt(cublasLtMatrixLayoutCreate(&la, type(), static_cast<std::uint64_t>(k),
                                        static_cast<std::uint64_t>(m), k),
             "layout a");
    check_lt(cublasLtMatrixLayoutCreate(&lc, type(), static_cast<std::uint64_t>(n),
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

PinnedHalfGemm::PinnedHalfGemm(std::int64_t n, std::int64_t k, std::int64_t m_ref, void* stream,
                               DType dtype)
    : impl_(std::make_unique<Impl>()) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    throw InvalidArgument(
        fmt::format("PinnedHalfGemm: dtype must be bfloat16 or float16, got {}", to_string(dtype)));
  Impl& s = *impl_;
  s.dtype = dtype;
  s.n = n, s.k = k, s.stream = static_cast<cudaStream_t>(stream);
  check_lt(cublasLtCreate(&s.lt), "cublasLtCreate");
  check_lt(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t nop = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &nop, sizeof nop),
           "transa");
  check_lt(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop),
           "transb");
  check_lt(cublasLtMatrixLayoutCreate(&s.lw, s.type(), static_cast<std::uint64_t>(n),
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
    throw CudaError(fmt::format("cuBLASLt offers no split-K-free {} algorithm that runs every m "
                                "for n = {}, k = {} ({} candidates:{})",
                                to_string(dtype), n, k, cand.size(), why));
  std::size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&s.algo, CUBLASLT_ALGO_CONFIG_ID, &s.algo_id,
                                       sizeof s.algo_id, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&s.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &s.tile,
                                       sizeof s.tile, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&s.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &s.stages,
                                       sizeof s.stages, &got);
  s.tune_small_m();
}

namespace {

// The pinned algorithm with another tile, or nothing when cuBLASLt refuses the combination.
bool with_tile(const cublasLtMatmulAlgo_t& pinned, int tile, cublasLtMatmulAlgo_t& out) {
  out = pinned;
  return cublasLtMatmulAlgoConfigSetAttribute(&out, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                              sizeof tile) == CUBLAS_STATUS_SUCCESS;
}

} // namespace

// For each bucket of small m, the fastest tile of the shortlist whose rows 0, m / 2 and m - 1 are
// bitwise the pinned tile's on the same operands. Any failure (memory, a refused tile) leaves that
// bucket, or all of them, on the pinned tile.
void PinnedHalfGemm::Impl::tune_small_m() {
  by_m.fill(algo);
  tile_by_m.fill(tile);
  const std::int64_t m_max = kTunedM.back();
  // Normal operands in the GEMM's dtype (fill_normal waits for the device), from the allocator
  // of this GEMM's stream.
  Tensor ta, tw, tc;
  try {
    int dev = 0;
    SAMEBITS_CUDA_CHECK(cudaGetDevice(&dev));
    const Device on = Device::cuda(dev);
    ta = Tensor::empty({m_max, k}, dtype, on, Stream{stream});
    tw = Tensor::empty({k, n}, dtype, on, Stream{stream});
    tc = Tensor::empty({m_max, n}, dtype, on, Stream{stream});
    fill_normal(ta, 1, 0);
    fill_normal(tw, 2, 0);
  } catch (const std::exception&) {
    return;
  }
  const void *a = ta.view().data, *w = tw.view().data;
  void* c = tc.view().data;
  std::vector<std::pair<int, cublasLtMatmulAlgo_t>> cands;
  for (int t : kTileShortlist) {
    cublasLtMatmulAlgo_t al;
    if (t != tile && with_tile(algo, t, al) && fails_at(al).empty())
      cands.emplace_back(t, al);
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    if (start != nullptr) // the second failed: give the first back
      cudaEventDestroy(start);
    cudaGetLastError();
    return;
  }
  // Rows 0, m / 2 and m - 1 of c after one run (empty when the run failed).
  auto rows_of = [&](const cublasLtMatmulAlgo_t& al, std::int64_t m) {
    std::vector<std::uint16_t> h;
    if (matmul(al, a, w, c, m) != CUBLAS_STATUS_SUCCESS)
      return h;
    h.resize(static_cast<std::size_t>(3 * n));
    for (int i = 0; i < 3; ++i) {
      const std::int64_t r = i == 0 ? 0 : i == 1 ? m / 2 : m - 1;
      if (cudaMemcpyAsync(h.data() + i * n, static_cast<const std::uint16_t*>(c) + r * n,
                          static_cast<std::size_t>(n) * 2, cudaMemcpyDeviceToHost,
                          stream) != cudaSuccess)
        return std::vector<std::uint16_t>{};
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess)
      return std::vector<std::uint16_t>{};
    return h;
  };
  // Milliseconds per run over 5 runs (the best of three such loops), after rows_of's run.
  auto time_of = [&](const cublasLtMatmulAlgo_t& al, std::int64_t m) {
    float best = 1e30f;
    for (int loop = 0; loop < 3; ++loop) {
      cudaEventRecord(start, stream);
      for (int i = 0; i < 5; ++i)
        matmul(al, a, w, c, m);
      cudaEventRecord(stop, stream);
      float ms = 0;
      if (cudaEventSynchronize(stop) == cudaSuccess &&
          cudaEventElapsedTime(&ms, start, stop) == cudaSuccess)
        best = std::min(best, ms / 5);
    }
    return best;
  };
  for (std::size_t b = 0; b < kTunedM.size(); ++b) {
    const std::int64_t m = kTunedM[b];
    const auto want = rows_of(algo, m);
    if (want.empty())
      break;
    float best = time_of(algo, m);
    for (const auto& [t, al] : cands) {
      if (rows_of(al, m) != want)
        continue; // other bits: never used
      // 3% better, so that near ties keep the pinned tile
      if (const float ms = time_of(al, m); ms < 0.97f * best) {
        best = ms;
        by_m[b] = al;
        tile_by_m[b] = t;
      }
    }
  }
  cudaGetLastError();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

PinnedHalfGemm::~PinnedHalfGemm() {
  if (!impl_)
    return;
  cudaFree(impl_->workspace);
  cublasLtMatrixLayoutDestroy(impl_->lw);
  cublasLtMatmulDescDestroy(impl_->op);
  cublasLtDestroy(impl_->lt);
}

void PinnedHalfGemm::run(const void* a, const void* w, void* c, std::int64_t m) const {
  check_lt(impl_->matmul(impl_->algo_for(m), a, w, c, m), "cublasLtMatmul (pinned algorithm)");
}

std::string PinnedHalfGemm::describe() const {
  const auto& t = impl_->tile_by_m;
  return fmt::format("cuBLASLt algo {} tile {} stages {} (tiles for m <= 4, 32, 128, 512: {}, {}, "
                     "{}, {}), split-K 1, fixed 1 MiB workspace",
                     impl_->algo_id, impl_->tile, impl_->stages, t[0], t[1], t[2], t[3]);
}

} // namespace samebits::detail

// gemm's cuda.cublas variant: cublasSgemm/Dgemm on a handle owned by (device, stream) with its own
// fixed workspace, atomics not allowed and CUBLAS_DEFAULT_MATH (no TF32).
//
// Why it is run_to_run under concurrent streams: cuBLAS gives the same bits for the same call,
// handle configuration and GPU; what changes results between otherwise equal calls is the kernel
// (and split) its heuristics pick, which depends on the workspace it is given. A handle shared by
// several streams falls back to a shared default workspace pool whose availability varies with
// what the other streams run (CUBLAS_WORKSPACE_CONFIG exists for this). Here every (device,
// stream) pair has its own handle, bound once to that stream and to its own workspace of a fixed
// size, so a call sees the same configuration whatever runs elsewhere; and calls on one stream
// are ordered, so they never use the workspace at the same time. It is not batch-invariant: the
// kernel and its split of k depend on m.
#include "core/memory.hpp"
#include "cuda/check.cuh"
#include "cuda/gemm_cublas.hpp"
#include "cuda/gemm_kernels.cuh"

#include <algorithm>
#include <climits>
#include <cublas_v2.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace samebits::detail {

using cuda_gemm::i64;

namespace {

template <class T> void launch_scale(const GemmArgs& g, Epilogue<T> epi, cudaStream_t s) {
  const i64 total = g.m() * g.n();
  const i64 blocks = std::min<i64>((total + 255) / 256, 8192);
  cuda_gemm::gemm_scale<T><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
      static_cast<T*>(g.c.data), g.c.strides[0], g.c.strides[1], g.m(), g.n(), epi);
  SAMEBITS_CUDA_CHECK_LAUNCH("gemm_scale");
}

constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20; // cuBLAS's advice for Hopper

void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("cuBLAS call failed: ") + what + ": " + cublasGetStatusString(st));
}

struct BlasHandle {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex m; // calls are enqueued one at a time; the stream orders their execution
};

// Never destroyed: handles and workspaces live as long as the process (device teardown order at
// exit is not ours to race with), or until release_stream gives a stream's back.
struct BlasHandles {
  std::mutex mutex;
  std::map<std::pair<int, void*>, std::unique_ptr<BlasHandle>> by_stream;
};
BlasHandles& blas_handles() {
  static auto* h = new BlasHandles;
  return *h;
}

BlasHandle& blas_handle(int device, cudaStream_t stream) {
  auto& all = blas_handles();
  std::lock_guard lock(all.mutex);
  auto& slot = all.by_stream[{device, static_cast<void*>(stream)}];
  if (slot)
    return *slot;
  auto h = std::make_unique<BlasHandle>();
  check_blas(cublasCreate(&h->handle), "cublasCreate");
  // cublasSetStream resets the workspace to the default pool, so the stream comes first.
  check_blas(cublasSetStream(h->handle, stream), "cublasSetStream");
  h->workspace = cuda_allocate(kBlasWorkspaceBytes, device, Stream{stream});
  check_blas(cublasSetWorkspace(h->handle, h->workspace, kBlasWorkspaceBytes),
             "cublasSetWorkspace");
  check_blas(cublasSetMathMode(h->handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check_blas(cublasSetAtomicsMode(h->handle, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
  check_blas(cublasSetPointerMode(h->handle, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  slot = std::move(h);
  return *slot;
}

// A logical rows x cols operand as cuBLAS sees it: column-major storage, maybe transposed.
struct BlasOperand {
  cublasOperation_t op = CUBLAS_OP_N;
  i64 ld = 1;
  bool ok = false;
};

BlasOperand blas_operand(i64 rows, i64 cols, i64 rs, i64 cs) {
  if (rs < 0 || cs < 0)
    return {};
  if (rs == 1 || rows <= 1) { // column-major as it is
    const i64 ld = cols > 1 ? cs : std::max<i64>(1, rows);
    if (ld >= std::max<i64>(1, rows) && ld <= INT_MAX)
      return {CUBLAS_OP_N, ld, true};
  }
  if (cs == 1 || cols <= 1) { // row-major: the transpose of a column-major cols x rows
    const i64 ld = rows > 1 ? rs : std::max<i64>(1, cols);
    if (ld >= std::max<i64>(1, cols) && ld <= INT_MAX)
      return {CUBLAS_OP_T, ld, true};
  }
  return {};
}

// The cuBLAS problem: C' = A' B' with C' column-major (m', n'). Either C itself (C column-major)
// or C^T = op(b)^T op(a)^T (C row-major).
struct BlasPlan {
  bool ok = false;
  bool swapped = false; // computing C^T
  i64 m = 0, n = 0, k = 0, ldc = 1;
  BlasOperand a, b;
  std::string why;
};

BlasPlan blas_plan(const GemmArgs& g) {
  BlasPlan p;
  const i64 m = g.m(), n = g.n(), k = g.k();
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    p.why = "a dimension exceeds cuBLAS's 32-bit sizes";
    return p;
  }
  const i64 crs = g.c.strides[0], ccs = g.c.strides[1];
  const i64 ars = g.a.strides[0], acs = g.a.strides[1], brs = g.b.strides[0], bcs = g.b.strides[1];
  const BlasOperand c_direct = blas_operand(m, n, crs, ccs);
  if (c_direct.ok && c_direct.op == CUBLAS_OP_N) {
    p = {true,
         false,
         m,
         n,
         k,
         c_direct.ld,
         blas_operand(m, k, ars, acs),
         blas_operand(k, n, brs, bcs),
         {}};
  } else {
    const BlasOperand c_t = blas_operand(n, m, ccs, crs);
    if (!(c_t.ok && c_t.op == CUBLAS_OP_N)) {
      p.why = "c needs a unit stride in one dimension (and a leading dimension that fits cuBLAS)";
      return p;
    }
    p = {true, true, n, m, k, c_t.ld, blas_operand(n, k, bcs, brs), blas_operand(k, m, acs, ars),
         {}};
  }
  if (!p.a.ok || !p.b.ok) {
    p.ok = false;
    p.why =
        "a and b need a unit stride in one dimension (and a leading dimension that fits cuBLAS)";
  }
  return p;
}

template <class T> void run_cublas_t(const GemmArgs& g, cudaStream_t s) {
  const Epilogue<T> epi{static_cast<T>(g.alpha), static_cast<T>(g.beta)};
  // Same rule as the other variants for k == 0 and alpha == 0 (a and b not read).
  if (g.k() == 0 || epi.alpha == T(0))
    return launch_scale<T>(g, epi, s);
  const BlasPlan p = blas_plan(g);
  if (!p.ok)
    throw InvalidArgument("gemm: cuda.cublas cannot take these operands: " + p.why);
  const T* first = static_cast<const T*>(p.swapped ? g.b.data : g.a.data);
  const T* second = static_cast<const T*>(p.swapped ? g.a.data : g.b.data);
  BlasHandle& h = blas_handle(g.c.device.index, s);
  std::lock_guard lock(h.m);
  const auto M = static_cast<int>(p.m), N = static_cast<int>(p.n), K = static_cast<int>(p.k);
  // beta == 0: cuBLAS does not read C, as BLAS specifies.
  if constexpr (sizeof(T) == 4)
    check_blas(cublasSgemm(h.handle, p.a.op, p.b.op, M, N, K, &epi.alpha, first,
                           static_cast<int>(p.a.ld), second, static_cast<int>(p.b.ld), &epi.beta,
                           static_cast<T*>(g.c.data), static_cast<int>(p.ldc)),
               "cublasSgemm");
  else
    check_blas(cublasDgemm(h.handle, p.a.op, p.b.op, M, N, K, &epi.alpha, first,
                           static_cast<int>(p.a.ld), second, static_cast<int>(p.b.ld), &epi.beta,
                           static_cast<T*>(g.c.data), static_cast<int>(p.ldc)),
               "cublasDgemm");
}

} // namespace

cublasHandle_t cublas_handle_for(int device, void* stream) {
  return blas_handle(device, static_cast<cudaStream_t>(stream)).handle;
}

void run_cublas(const GemmArgs& g, const Workspace& ws) {
  if (g.m() == 0 || g.n() == 0)
    return;
  const cudaStream_t s = SAMEBITS_STREAM(ws.stream);
  if (g.c.dtype == DType::f32)
    run_cublas_t<float>(g, s);
  else
    run_cublas_t<double>(g, s);
}

std::string cublas_why_not(const GemmArgs& g) {
  if (g.m() == 0 || g.n() == 0 || g.k() == 0)
    return {};
  const BlasPlan p = blas_plan(g);
  return p.ok ? std::string{} : p.why;
}

void release_blas_handle(int device, Stream stream) {
  auto& all = blas_handles();
  std::unique_ptr<BlasHandle> h;
  {
    std::lock_guard lock(all.mutex);
    const auto it = all.by_stream.find({device, stream.handle});
    if (it == all.by_stream.end())
      return;
    h = std::move(it->second);
    all.by_stream.erase(it);
  }
  std::lock_guard in_use(h->m); // a call still enqueuing on it finishes first
  cublasDestroy(h->handle);
  cuda_free(h->workspace, device, stream);
}

} // namespace samebits::detail

// The host's cost of one call on tiny CUDA inputs: what a training of many small ops (a PyG model
// on Cora) pays per op around its kernels. Each row is wall time per call over a loop of calls
// with one device wait at the end (the GPU finishes each tiny kernel long before the host has
// queued the next), with waiting and with deferred index checks, beside single runtime calls for
// scale. Rows of the family "overhead"; `ms` holds milliseconds per call.
#include "gpu_common.hpp"
#include "samebits/stream.hpp"

#include <chrono>
#include <fmt/format.h>

namespace samebits::bench {

namespace {

double host_ms_per_call(const std::function<void()>& fn, int calls) {
  for (int i = 0; i < 50; ++i)
    fn();
  cudaDeviceSynchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    fn();
  cudaDeviceSynchronize();
  const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - t0;
  if (cudaGetLastError() != cudaSuccess)
    throw CudaError("benchmark: a CUDA call failed while timing");
  return d.count() / calls;
}

struct Case {
  std::string op, shape, level;
  std::function<void(const Options&)> run;
};

} // namespace

void bench_overhead(Report& r) {
  const int calls = r.quick ? 200 : 2000;
  const Options r2r{.level = Determinism::run_to_run}, ng{.level = Determinism::not_guaranteed};
  // bench_torch.py's tiny inputs, and one SAGEConv aggregation on Cora (10556 edges, 16 features).
  Tensor x4 = gpu_normal({16, 4}), src4 = gpu_normal({32, 4}), idx32 = gpu_index(32, 16);
  Tensor x16 = gpu_normal({16, 16}), src16 = gpu_normal({32, 16});
  Tensor cora_out = gpu_normal({2708, 16}), cora_src = gpu_normal({10556, 16});
  Tensor cora_idx = gpu_index(10556, 2708), cora_ones = gpu_normal({10556, 1});
  Tensor cora_count = gpu_normal({2708, 1});
  Tensor sel = Tensor::empty({32, 4}, DType::f32, Device::cuda());
  Tensor v = gpu_normal({64}), vout = Tensor::empty({64}, DType::f32, Device::cuda());
  Tensor s1 = Tensor::empty({1}, DType::f32, Device::cuda());
  Tensor a = gpu_normal({8, 8}), b = gpu_normal({8, 8}), c = gpu_normal({8, 8});
  TensorView gidx = idx32.view(); // [32, 4] with stride 0 along the features
  gidx.ndim = 2;
  gidx.shape = {32, 4, 0, 0};
  gidx.strides = {1, 0, 0, 0};
  const std::vector<Case> cases = {
      {"index_add", "[32 x 4] into 16 rows (fixed-point sums)", "run_to_run",
       [&](const Options& o) { index_add(x4, idx32, src4, 1.0, o); }},
      {"index_add", "[32 x 16] into 16 rows (sort and pull)", "run_to_run",
       [&](const Options& o) { index_add(x16, idx32, src16, 1.0, o); }},
      {"index_add", "[32 x 4] into 16 rows (atomics)", "not_guaranteed",
       [&](const Options&) { index_add(x4, idx32, src4, 1.0, ng); }},
      {"index_add", "Cora: [10556 x 16] into 2708 rows", "run_to_run",
       [&](const Options& o) { index_add(cora_out, cora_idx, cora_src, 1.0, o); }},
      {"index_add", "Cora: [10556 x 1] into 2708 rows (counts)", "run_to_run",
       [&](const Options& o) { index_add(cora_count, cora_idx, cora_ones, 1.0, o); }},
      {"scatter_add", "[32 x 4], index expanded, into 16 rows", "run_to_run",
       [&](const Options& o) { scatter_add(x4, 0, gidx, src4, o); }},
      {"index_select", "16 rows of 4 -> 32", "run_to_run",
       [&](const Options& o) { index_select(x4, 0, idx32, sel, o); }},
      {"sum", "64 values", "run_to_run", [&](const Options& o) { sum(v, s1, o); }},
      {"cumsum", "64 values", "run_to_run", [&](const Options& o) { cumsum(v, 0, vout, o); }},
      {"gemm", "8 x 8 x 8", "run_to_run",
       [&](const Options& o) { gemm(Transpose::no, Transpose::no, 1.0, a, b, 0.0, c, o); }},
  };
  const CudaIndexChecks saved = cuda_index_checks();
  for (const auto& cs : cases)
    for (CudaIndexChecks checks : {CudaIndexChecks::wait, CudaIndexChecks::deferred}) {
      set_cuda_index_checks(checks);
      const double ms = host_ms_per_call([&] { cs.run(r2r); }, calls);
      r.add({"overhead", cs.op, cs.shape,
             checks == CudaIndexChecks::wait ? "host per call, checks wait"
                                             : "host per call, checks deferred",
             cs.level, ms, 0, "wall time per call of a loop, one wait at the end"});
    }
  set_cuda_index_checks(saved);
  // The runtime's own costs, for scale.
  void* word = nullptr;
  cudaMalloc(&word, 8);
  cudaStreamCaptureStatus status{};
  int device = 0;
  const std::vector<std::pair<std::string, std::function<void()>>> runtime = {
      {"cudaMemsetAsync of 8 bytes", [&] { cudaMemsetAsync(word, 0, 8, nullptr); }},
      {"cudaStreamIsCapturing", [&] { cudaStreamIsCapturing(nullptr, &status); }},
      {"cudaGetDevice", [&] { cudaGetDevice(&device); }},
      {"Tensor::empty(256 floats) and its release",
       [&] { Tensor t = Tensor::empty({256}, DType::f32, Device::cuda()); }},
  };
  for (const auto& [name, fn] : runtime)
    r.add({"overhead", "runtime", name, "host per call", "-", host_ms_per_call(fn, calls), 0,
           "for scale"});
  cudaFree(word);
}

} // namespace samebits::bench

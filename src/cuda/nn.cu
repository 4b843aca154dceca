// CUDA implementations of the GraphSAGE model kernels (src/nn/kernels.hpp), float32. Each output
// element is computed by one thread with the same correctly rounded operations, in the same
// order, as the CPU implementation (the shared per-element code is src/nn/kernel_math.hpp), so
// the results are bitwise equal to the CPU's for any block size. Compiled with --fmad=false;
// the sparse products also spell their roundings out with __fadd_rn/__fmul_rn.
//
// Each function makes its tensors' GPU current for its launches (the caller's device comes back
// on return), as the op dispatcher does for the ops.
//
// The block size of every launch but the staged log-softmax's (128 rows a block) is
// kernels::NnTuning's (core/tuning.hpp); tests run other sizes and get the same bits.
#include "core/memory.hpp"
#include "core/tuning.hpp"
#include "cuda/check.cuh"
#include "cuda/vec16.cuh"
#include "nn/kernel_math.hpp"
#include "nn/kernels.hpp"

#include <cstdint>
#include <cuda_runtime.h>

namespace samebits::nn::kernels::cuda {

namespace {

using samebits::detail::aligned16;
using samebits::detail::load16;
using samebits::detail::store16;

int block_size() {
  const int b = samebits::detail::tuning<NnTuning>().block;
  if (b < 32 || b > 1024 || b % 32 != 0)
    throw InvalidArgument("NnTuning::block: a multiple of 32 in [32, 1024] expected");
  return b;
}

struct Launch {
  unsigned grid = 0, block = 0;
  bool empty = true;
};
// Blocks of `block` threads (the tuning's size unless given) over n threads.
Launch launch_for(std::int64_t n, int block = block_size()) {
  Launch l;
  if (n <= 0)
    return l;
  l.block = static_cast<unsigned>(block);
  const std::int64_t g = (n + l.block - 1) / l.block;
  if (g > 0x7fffffff)
    throw InvalidArgument("GraphSAGE CUDA kernels: tensor too large for one launch");
  l.grid = static_cast<unsigned>(g);
  l.empty = false;
  return l;
}

__device__ __forceinline__ std::int64_t global_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// One thread per (row, column): the sum over the row's entries in ascending k, from +0.
__global__ void spmm_pair_kernel(std::int64_t rows, std::int64_t h, const std::int64_t* off,
                                 const std::int32_t* cols, const float* vals, const float* a,
                                 const float* b, float* oa, float* ob) {
  const std::int64_t i = global_index();
  if (i >= rows * h)
    return;
  const std::int64_t r = i / h, c = i % h;
  float acc_a = 0.0f, acc_b = 0.0f;
  const std::int64_t k1 = off[r + 1];
  if (vals == nullptr) {
    for (std::int64_t k = off[r]; k < k1; ++k) {
      const std::int64_t base = static_cast<std::int64_t>(cols[k]) * h + c;
      acc_a = __fadd_rn(acc_a, a[base]);
      acc_b = __fadd_rn(acc_b, b[base]);
    }
  } else {
    for (std::int64_t k = off[r]; k < k1; ++k) {
      const std::int64_t base = static_cast<std::int64_t>(cols[k]) * h + c;
      const float v = vals[k];
      acc_a = __fadd_rn(acc_a, __fmul_rn(v, a[base]));
      acc_b = __fadd_rn(acc_b, __fmul_rn(v, b[base]));
    }
  }
  oa[i] = acc_a;
  ob[i] = acc_b;
}

// The elementwise kernels below take kPerThread consecutive elements per thread, 16 bytes at a
// time when all of them are there and every pointer is aligned (each element's value is the same
// expression either way).
constexpr int kPerThread = 4;
template <class... P>
__device__ __forceinline__ bool whole_aligned(std::int64_t i0, std::int64_t n, const P*... p) {
  return i0 + kPerThread <= n && (aligned16(p) && ...);
}

__global__ void add_bias_kernel(std::int64_t n, std::int64_t h, const float* x, const float* y,
                                const float* bias, float* out) {
  const std::int64_t i0 = global_index() * kPerThread;
  if (i0 >= n)
    return;
  std::int64_t col = i0 % h;
  if (whole_aligned(i0, n, x + i0, y + i0, out + i0)) {
    float xv[kPerThread], yv[kPerThread], o[kPerThread];
    load16(x + i0, xv);
    load16(y + i0, yv);
#pragma unroll
    for (int q = 0; q < kPerThread; ++q) {
      o[q] = __fadd_rn(__fadd_rn(xv[q], yv[q]), bias[col]);
      if (++col == h)
        col = 0;
    }
    store16(out + i0, o);
    return;
  }
  for (std::int64_t i = i0; i < n && i < i0 + kPerThread; ++i) {
    out[i] = __fadd_rn(__fadd_rn(x[i], y[i]), bias[col]);
    if (++col == h)
      col = 0;
  }
}

__global__ void relu_dropout_kernel(std::int64_t n, const float* pre, float* out, bool training,
                                    std::uint64_t seed, std::uint64_t stream, float p,
                                    float scale) {
  const std::int64_t i0 = global_index() * kPerThread;
  if (i0 >= n)
    return;
  if (whole_aligned(i0, n, pre + i0, out + i0)) {
    float v[kPerThread];
    load16(pre + i0, v);
#pragma unroll
    for (int q = 0; q < kPerThread; ++q)
      v[q] = relu_dropout_elem<float>(v[q], training, seed, stream,
                                      static_cast<std::uint64_t>(i0 + q), p, scale);
    store16(out + i0, v);
    return;
  }
  for (std::int64_t i = i0; i < n && i < i0 + kPerThread; ++i)
    out[i] = relu_dropout_elem<float>(pre[i], training, seed, stream, static_cast<std::uint64_t>(i),
                                      p, scale);
}

__global__ void relu_dropout_backward_kernel(std::int64_t n, const float* out, const float* g,
                                             float scale, float* gp) {
  const std::int64_t i = global_index();
  if (i < n)
    gp[i] = relu_dropout_grad_elem<float>(out[i], g[i], scale);
}

__global__ void log_softmax_nll_kernel(std::int64_t rows, std::int64_t classes, const float* z,
                                       const std::int32_t* target, float count, float* logp,
                                       float* grad, float* nll) {
  const std::int64_t r = global_index();
  if (r < rows)
    log_softmax_row<float>(z + r * classes, classes, target[r], count, logp + r * classes,
                           grad + r * classes, nll + r);
}

// The same rows through shared memory, for up to kStagedClasses classes: a block's rows of z are
// read, and its rows of logp and grad written, by consecutive threads (whole lines of memory),
// while each thread still computes one row with log_softmax_row, in the same order (the same bits).
// Rows are padded to an odd stride so that the threads' rows fall in different banks.
constexpr int kStagedRows = 128, kStagedClasses = 16, kStagedStride = kStagedClasses + 1;
__global__ void __launch_bounds__(kStagedRows)
    log_softmax_nll_staged_kernel(std::int64_t rows, int classes, const float* z,
                                  const std::int32_t* target, float count, float* logp, float* grad,
                                  float* nll) {
  __shared__ float zs[kStagedRows * kStagedStride], ls[kStagedRows * kStagedStride],
      gs[kStagedRows * kStagedStride];
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * kStagedRows;
  const int n = static_cast<int>(rows - r0 < kStagedRows ? rows - r0 : kStagedRows);
  const int total = n * classes;
  const std::int64_t base = r0 * classes;
  for (int e = static_cast<int>(threadIdx.x); e < total; e += kStagedRows)
    zs[e / classes * kStagedStride + e % classes] = z[base + e];
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  if (t < n)
    log_softmax_row<float>(zs + t * kStagedStride, classes, target[r0 + t], count,
                           ls + t * kStagedStride, gs + t * kStagedStride, nll + r0 + t);
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < total; e += kStagedRows) {
    const int at = e / classes * kStagedStride + e % classes;
    logp[base + e] = ls[at];
    grad[base + e] = gs[at];
  }
}

__global__ void divide_rows_kernel(std::int64_t n, std::int64_t h, const float* x, const float* deg,
                                   float* out) {
  const std::int64_t i = global_index();
  if (i < n)
    out[i] = divide_elem<float>(x[i], deg[i / h]);
}

__global__ void adam_kernel(std::int64_t n, float* p, const float* g, float* m, float* v,
                            AdamScalars<float> k) {
  const std::int64_t i = global_index();
  if (i < n)
    adam_elem<float>(p[i], g[i], m[i], v[i], k);
}

cudaStream_t stream_of(Stream s) {
  return SAMEBITS_STREAM(s);
}

} // namespace

void spmm_pair(const DeviceCsr& m, const TensorView& a, const TensorView& b,
               const TensorView& out_a, const TensorView& out_b, Stream s) {
  const samebits::detail::CurrentDevice on_device(a.device);
  const std::int64_t h = a.size(1);
  const Launch l = launch_for(m.rows * h);
  if (l.empty)
    return;
  spmm_pair_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(
      m.rows, h, m.offsets.data<std::int64_t>(), m.cols.data<std::int32_t>(),
      m.unit ? nullptr : m.values.data<float>(), a.ptr<float>(), b.ptr<float>(), out_a.ptr<float>(),
      out_b.ptr<float>());
  SAMEBITS_CUDA_CHECK_LAUNCH("spmm_pair");
}

void add_bias(const TensorView& x, const TensorView& y, const TensorView& bias,
              const TensorView& out, Stream s) {
  const samebits::detail::CurrentDevice on_device(x.device);
  const Launch l = launch_for((x.numel() + kPerThread - 1) / kPerThread);
  if (l.empty)
    return;
  add_bias_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(
      x.numel(), x.size(1), x.ptr<float>(), y.ptr<float>(), bias.ptr<float>(), out.ptr<float>());
  SAMEBITS_CUDA_CHECK_LAUNCH("add_bias");
}

void relu_dropout(const TensorView& pre, const TensorView& out, bool training, std::uint64_t seed,
                  std::uint64_t stream, float p, float scale, Stream s) {
  const samebits::detail::CurrentDevice on_device(pre.device);
  const Launch l = launch_for((pre.numel() + kPerThread - 1) / kPerThread);
  if (l.empty)
    return;
  relu_dropout_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(
      pre.numel(), pre.ptr<float>(), out.ptr<float>(), training, seed, stream, p, scale);
  SAMEBITS_CUDA_CHECK_LAUNCH("relu_dropout");
}

void relu_dropout_backward(const TensorView& out, const TensorView& grad_out, float scale,
                           const TensorView& grad_pre, Stream s) {
  const samebits::detail::CurrentDevice on_device(out.device);
  const Launch l = launch_for(out.numel());
  if (l.empty)
    return;
  relu_dropout_backward_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(
      out.numel(), out.ptr<float>(), grad_out.ptr<float>(), scale, grad_pre.ptr<float>());
  SAMEBITS_CUDA_CHECK_LAUNCH("relu_dropout_backward");
}

void log_softmax_nll(const TensorView& logits, const TensorView& target, float count,
                     const TensorView& logp, const TensorView& grad, const TensorView& nll,
                     Stream s) {
  const samebits::detail::CurrentDevice on_device(logits.device);
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows > 0 && classes >= 1 && classes <= kStagedClasses) {
    const Launch l = launch_for(rows, kStagedRows);
    log_softmax_nll_staged_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(
        rows, static_cast<int>(classes), logits.ptr<float>(), target.ptr<std::int32_t>(), count,
        logp.ptr<float>(), grad.ptr<float>(), nll.ptr<float>());
    SAMEBITS_CUDA_CHECK_LAUNCH("log_softmax_nll");
    return;
  }
  const Launch l = launch_for(logits.size(0));
  if (l.empty)
    return;
  log_softmax_nll_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(
      logits.size(0), logits.size(1), logits.ptr<float>(), target.ptr<std::int32_t>(), count,
      logp.ptr<float>(), grad.ptr<float>(), nll.ptr<float>());
  SAMEBITS_CUDA_CHECK_LAUNCH("log_softmax_nll");
}

void divide_rows(const TensorView& x, const TensorView& deg, const TensorView& out, Stream s) {
  const samebits::detail::CurrentDevice on_device(x.device);
  const Launch l = launch_for(x.numel());
  if (l.empty)
    return;
  divide_rows_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(x.numel(), x.size(1), x.ptr<float>(),
                                                           deg.ptr<float>(), out.ptr<float>());
  SAMEBITS_CUDA_CHECK_LAUNCH("divide_rows");
}

void adam(const TensorView& param, const TensorView& grad, const TensorView& m, const TensorView& v,
          const AdamScalars<float>& k, Stream s) {
  const samebits::detail::CurrentDevice on_device(param.device);
  const Launch l = launch_for(param.numel());
  if (l.empty)
    return;
  adam_kernel<<<l.grid, l.block, 0, stream_of(s)>>>(
      param.numel(), param.ptr<float>(), grad.ptr<float>(), m.ptr<float>(), v.ptr<float>(), k);
  SAMEBITS_CUDA_CHECK_LAUNCH("adam");
}

} // namespace samebits::nn::kernels::cuda

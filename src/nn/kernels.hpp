// The elementwise and fused steps of the GraphSAGE model that are not general samebits ops:
// sparse (CSR) times dense products, bias add, ReLU + dropout, log-softmax + NLL, Adam. Each has
// one CPU implementation (float and double; src/nn/kernels.cpp) and one CUDA implementation
// (float; src/cuda/nn.cu), written to give the same bits: every output element is computed by
// the same sequence of correctly rounded operations on both, whatever the thread or block
// count. These are deterministic at every level (the model's nondeterminism at not_guaranteed
// comes from the samebits ops it calls).
//
// All tensors are contiguous and on one device. Shapes in comments: N nodes, F features,
// H width, C classes.
#pragma once
#include "nn/kernel_math.hpp"
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>

namespace samebits::nn::kernels {

// A CSR matrix on a device: row r has columns cols[offsets[r] .. offsets[r+1]).
struct DeviceCsr {
  std::int64_t rows = 0;
  Tensor offsets;   // int64 [rows + 1]
  Tensor cols;      // int32 [nnz]
  Tensor values;    // T [nnz]; unused when `unit`
  bool unit = true; // every stored value is 1 (binary features, adjacency)
};

// out_a[r, :] = sum_k values[k] * a[cols[k], :] and the same for b -> out_b, the sum taken in
// ascending k from +0 (a row with no entries gives +0). a, b: [K, H]; outs: [rows, H].
void spmm_pair(const DeviceCsr& m, const TensorView& a, const TensorView& b,
               const TensorView& out_a, const TensorView& out_b, Stream s);

// out[r, c] = (x[r, c] + y[r, c]) + bias[c]. x, y, out: [N, H]; bias: [H].
void add_bias(const TensorView& x, const TensorView& y, const TensorView& bias,
              const TensorView& out, Stream s);

// out = relu(pre), then with `training` each element i (row-major) is dropped when
// rng::uniform(seed, stream, i) < p and otherwise multiplied by scale = 1 / (1 - p).
void relu_dropout(const TensorView& pre, const TensorView& out, bool training, std::uint64_t seed,
                  std::uint64_t stream, float p, double scale, Stream s);
// grad_pre = out > 0 ? grad_out * scale : 0 (out > 0 exactly when pre > 0 and kept).
void relu_dropout_backward(const TensorView& out, const TensorView& grad_out, double scale,
                           const TensorView& grad_pre, Stream s);

// Per row of logits [N, C]: logp = log_softmax (portable exp/log, fixed order). For rows with
// target[r] >= 0: nll[r] = -logp[r, target], grad[r, :] = (softmax - onehot) / count; other rows
// get nll 0 and grad 0. target: int32 [N].
void log_softmax_nll(const TensorView& logits, const TensorView& target, double count,
                     const TensorView& logp, const TensorView& grad, const TensorView& nll,
                     Stream s);

// out[r, :] = x[r, :] / deg[r], 0 where deg[r] == 0. x, out: [N, H]; deg: [N] (same dtype).
void divide_rows(const TensorView& x, const TensorView& deg, const TensorView& out, Stream s);

struct AdamStep {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double step_size = 0;  // lr / (1 - beta1^t), computed by the host
  double bias2_sqrt = 0; // sqrt(1 - beta2^t), computed by the host
};
// PyTorch's Adam with L2 weight decay, per element in this order:
//   g = grad + wd * p;  m = beta1 m + (1 - beta1) g;  v = beta2 v + ((1 - beta2) g) g;
//   p = p - step_size * (m / (sqrt(v) / bias2_sqrt + eps)).
// Scalars are rounded to the parameter dtype once, on the host.
void adam(const TensorView& param, const TensorView& grad, const TensorView& m, const TensorView& v,
          const AdamStep& step, Stream s);

// Launch tuning of the CUDA implementations (set through core/tuning.hpp's set_tuning or
// TuningGuard, by tests): threads per block, a multiple of 32 in [32, 1024]. Every value gives
// the same bits.
struct NnTuning {
  int block = 256;
};

// The CUDA implementations (float only); the functions above forward to them. Built without
// CUDA, each throws BackendUnavailable (src/nn/nocuda/kernels.cpp).
namespace cuda {
void spmm_pair(const DeviceCsr& m, const TensorView& a, const TensorView& b,
               const TensorView& out_a, const TensorView& out_b, Stream s);
void add_bias(const TensorView& x, const TensorView& y, const TensorView& bias,
              const TensorView& out, Stream s);
void relu_dropout(const TensorView& pre, const TensorView& out, bool training, std::uint64_t seed,
                  std::uint64_t stream, float p, float scale, Stream s);
void relu_dropout_backward(const TensorView& out, const TensorView& grad_out, float scale,
                           const TensorView& grad_pre, Stream s);
void log_softmax_nll(const TensorView& logits, const TensorView& target, float count,
                     const TensorView& logp, const TensorView& grad, const TensorView& nll,
                     Stream s);
void divide_rows(const TensorView& x, const TensorView& deg, const TensorView& out, Stream s);
void adam(const TensorView& param, const TensorView& grad, const TensorView& m, const TensorView& v,
          const AdamScalars<float>& k, Stream s);
} // namespace cuda

} // namespace samebits::nn::kernels

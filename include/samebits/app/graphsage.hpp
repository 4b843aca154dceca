// A two-layer GraphSAGE classifier with mean aggregation, trained full-batch with Adam; forward
// and backward written out over samebits ops (gemm, aggregate, sum_dim) at a requested
// determinism level plus the model's own portable kernels (src/nn/kernels.hpp).
//
//   layer l:  h_i' = W_root h_i + W_neigh mean_{j -> i} h_j + b
//   model:    x -> layer 1 (F -> H) -> ReLU -> dropout p -> layer 2 (H -> C) -> log-softmax
//   loss:     mean negative log-likelihood over the training nodes
//
// Layer 1 multiplies first and aggregates after (mean_j(x_j) W = mean_j(x_j W)), so the sparse
// bag-of-words matrix X [N x F] is only ever used in sparse products, in a fixed order.
// Randomness is counter-based (Philox, samebits/rng.hpp): Glorot weights from (seed, parameter,
// element), dropout masks from (seed, epoch, layer, element). The same seed gives the same bits
// on every thread count and, at level portable, on the CPU and on CUDA.
#pragma once
#include "samebits/app/cora.hpp"
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace samebits::nn {

struct SageConfig {
  std::int64_t hidden = 16;
  double dropout = 0.5;
  double lr = 0.01;
  double weight_decay = 5e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  Determinism level = Determinism::portable; // passed to every samebits op
  Device device = Device::cpu();
  DType dtype = DType::f32; // float64 on the CPU only (gradient checks)
  Stream stream{};          // CUDA stream of every op and kernel (null: the default stream)
};

// Where each parameter lives in the flat parameter vector, in this order.
struct ParamLayout {
  enum Index { w1_root, w1_neigh, b1, w2_root, w2_neigh, b2, count };
  std::int64_t offset[count + 1] = {};
  Shape shape[count];
  std::int64_t total() const { return offset[count]; }
};

class GraphSage {
public:
  // Uploads the graph, features and labels to cfg.device once; reused by every run.
  GraphSage(const Dataset& data, const SageConfig& cfg);
  ~GraphSage();
  GraphSage(const GraphSage&) = delete;
  GraphSage& operator=(const GraphSage&) = delete;

  // A fresh run: Glorot weights and zero biases from `seed`, Adam state zero, epoch 0.
  void init(std::uint64_t seed);
  // One full-batch training step (forward with dropout, backward, Adam). Returns the training
  // loss before the step when `want_loss` (this costs a device synchronization), else NaN.
  double train_epoch(bool want_loss = false);
  // Forward without dropout; fraction of nodes in `split` whose argmax matches the label (NaN when
  // the split has no node).
  double accuracy(Split split);
  // Accuracy on several splits from one forward pass.
  std::vector<double> accuracies(const std::vector<Split>& splits);

  // Forward without dropout, asynchronously on the model's stream (for inference timing);
  // log_probs() then holds the output.
  void infer();
  Tensor log_probs() const; // [N, C] on the model's device

  // Forward (with dropout at the current epoch when `training`) and backward, no update:
  // returns the loss; gradients() then holds d loss / d parameters. For gradient checks.
  double loss_and_gradients(bool training);

  const ParamLayout& layout() const;
  Tensor parameters() const; // flat, on the model's device (shares storage: copy to keep)
  Tensor gradients() const;
  void set_parameters(const TensorView& flat); // any device; same dtype and size
  std::uint64_t parameter_hash() const;        // content_hash of the flat parameters
  std::int64_t epoch() const;
  const SageConfig& config() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace samebits::nn

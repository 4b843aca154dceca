// The GraphSAGE model's CUDA kernels when samebits is built without CUDA: each throws
// BackendUnavailable, so that src/nn/kernels.cpp needs no build switch.
#include "nn/kernels.hpp"

#include "samebits/errors.hpp"

#include <string>

namespace samebits::nn::kernels::cuda {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  throw BackendUnavailable(std::string(op) + ": CUDA tensors, but samebits was built without CUDA");
}
} // namespace

void spmm_pair(const DeviceCsr&, const TensorView&, const TensorView&, const TensorView&,
               const TensorView&, Stream) {
  no_cuda("spmm_pair");
}
void add_bias(const TensorView&, const TensorView&, const TensorView&, const TensorView&, Stream) {
  no_cuda("add_bias");
}
void relu_dropout(const TensorView&, const TensorView&, bool, std::uint64_t, std::uint64_t, float,
                  float, Stream) {
  no_cuda("relu_dropout");
}
void relu_dropout_backward(const TensorView&, const TensorView&, float, const TensorView&, Stream) {
  no_cuda("relu_dropout_backward");
}
void log_softmax_nll(const TensorView&, const TensorView&, float, const TensorView&,
                     const TensorView&, const TensorView&, Stream) {
  no_cuda("log_softmax_nll");
}
void divide_rows(const TensorView&, const TensorView&, const TensorView&, Stream) {
  no_cuda("divide_rows");
}
void adam(const TensorView&, const TensorView&, const TensorView&, const TensorView&,
          const AdamScalars<float>&, Stream) {
  no_cuda("adam");
}

} // namespace samebits::nn::kernels::cuda

// General matrix multiply.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/tensor.hpp"

namespace samebits {

enum class Transpose : bool { no = false, yes = true };

// c = alpha * op(a) @ op(b) + beta * c, with op(a): [m, k], op(b): [k, n], c: [m, n].
// float32 or float64, all three the same dtype. beta == 0 ignores c's old contents (NaN too).
void gemm(Transpose trans_a, Transpose trans_b, double alpha, const TensorView& a,
          const TensorView& b, double beta, const TensorView& c, const Options& opts = {});

}  // namespace samebits

// Arguments of the reduction ops, as their variants receive them (already validated).
#pragma once
#include "samebits/tensor.hpp"

namespace samebits::detail {

// sum: x reduced completely into out (one element).
// sum_dim: x reduced along `dim` into out (x's shape without dim).
struct SumArgs {
  TensorView x;
  TensorView out;
  int dim = -1; // -1: whole tensor
};

struct DotArgs {
  TensorView a;
  TensorView b;
  TensorView out;
};

} // namespace samebits::detail

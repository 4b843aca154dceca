// The CUDA half of the environment report: src/cuda/environment.cpp with CUDA compiled in,
// src/nocuda/environment.cpp without.
#pragma once
#include "samebits/environment.hpp"

namespace samebits::detail {

// Fills the CUDA fields of `e` (cuda_compiled, versions, gpus, cuda_error). Never throws.
void fill_cuda_environment(Environment& e);

} // namespace samebits::detail

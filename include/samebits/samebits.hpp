// samebits: bitwise-reproducible numerical ops. Include this for the whole public API.
#pragma once
#include "samebits/determinism.hpp"
#include "samebits/dtype.hpp"
#include "samebits/errors.hpp"
#include "samebits/ops/gemm.hpp"
#include "samebits/ops/histogram.hpp"
#include "samebits/ops/indexing.hpp"
#include "samebits/ops/reduce.hpp"
#include "samebits/ops/scan.hpp"
#include "samebits/ops/scatter.hpp"
#include "samebits/ops/segment.hpp"
#include "samebits/registry.hpp"
#include "samebits/tensor.hpp"
#include "samebits/threads.hpp"

namespace samebits {

std::string_view version();
std::string_view git_revision();
// True when the CUDA backend is compiled in and at least one device is present.
bool cuda_available();

}  // namespace samebits

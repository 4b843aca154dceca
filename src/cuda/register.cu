// The CUDA backend's explicit registration: one call per op family, in coverage-table order.
// Variants are registered whenever CUDA is compiled in; with no device present they are listed
// but any call fails with BackendUnavailable when it allocates.
#include "core/backends.hpp"
#include "core/registry.hpp"
#include "cuda/register.hpp"

namespace samebits::detail {

void register_cuda_ops(Registry& r) {
  (void)r;
  register_cuda_segment(r);
  register_cuda_indexing(r);
  register_cuda_scan(r);
  register_cuda_histogram(r);
  register_cuda_gemm(r);
  register_cuda_reduce(r);
  register_cuda_scatter(r);
  register_cuda_scatter_half(r); // after the float variants: they come first in preference order
}

} // namespace samebits::detail

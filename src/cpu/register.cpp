// The CPU backend's explicit registration: one call per op family, in coverage-table order.
#include "cpu/register.hpp"

#include "core/backends.hpp"
#include "core/registry.hpp"

namespace samebits::detail {

void register_cpu_ops(Registry& r) {
  register_cpu_reduce(r);
  register_cpu_segment(r);
  register_cpu_indexing(r);
  register_cpu_scan(r);
  register_cpu_histogram(r);
  register_cpu_scatter(r);
  register_cpu_gemm(r);
}

} // namespace samebits::detail

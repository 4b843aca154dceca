// The explicit registration calls of each backend. register_cuda_ops is empty in builds without
// CUDA (src/nocuda/), so the CPU-only library links the same way.
#pragma once

namespace samebits::detail {

class Registry;
void register_cpu_ops(Registry& r);
void register_cuda_ops(Registry& r);
// Number of CUDA devices present (0 without CUDA or without a device; never throws).
int cuda_device_count();

} // namespace samebits::detail

// The CUDA backend's trace digest (trace::digest_on_device), declared for the core; src/nocuda/
// stands in for it in builds without CUDA.
#pragma once
#include "samebits/trace.hpp"

#include <cstdint>

namespace samebits::detail {

// t is a contiguous CUDA tensor, stats_elements >= 0 (0: the hash alone), record device memory.
void cuda_trace_digest(const TensorView& t, std::int64_t stats_elements,
                       trace::DeviceDigest* record, Stream stream);

} // namespace samebits::detail

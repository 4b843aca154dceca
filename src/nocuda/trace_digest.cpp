// Stand-in for the CUDA trace digest in builds without CUDA.
#include "core/trace_device.hpp"
#include "samebits/errors.hpp"

namespace samebits::detail {

void cuda_trace_digest(const TensorView&, std::int64_t, trace::DeviceDigest*, Stream) {
  throw BackendUnavailable("this samebits was built without CUDA: no trace digest on cuda devices");
}

} // namespace samebits::detail

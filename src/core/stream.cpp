// The backend-neutral half of samebits/stream.hpp: the device scope and synchronize. Streams,
// events and graphs are in src/cuda/stream.cpp (src/nocuda/stream.cpp without CUDA).
#include "samebits/stream.hpp"

#include "core/memory.hpp"

#include <atomic>

namespace samebits {

namespace {
std::atomic<CudaIndexChecks> index_checks{CudaIndexChecks::wait};
}

DeviceScope::DeviceScope(Device device)
    : current_(device.is_cuda() ? std::make_unique<detail::CurrentDevice>(device) : nullptr) {}
DeviceScope::~DeviceScope() = default;

void synchronize(Device device, Stream stream) {
  if (device.is_cpu())
    return;
  const detail::CurrentDevice on_device(device);
  detail::cuda_synchronize(stream);
  detail::cuda_raise_deferred_index_error(device.index);
}

void set_cuda_index_checks(CudaIndexChecks checks) {
  index_checks.store(checks, std::memory_order_relaxed);
}

CudaIndexChecks cuda_index_checks() {
  return index_checks.load(std::memory_order_relaxed);
}

void check_index_errors(Device device) {
  if (device.is_cpu())
    return;
  const detail::CurrentDevice on_device(device);
  detail::cuda_synchronize_device();
  detail::cuda_raise_deferred_index_error(device.index);
}

} // namespace samebits

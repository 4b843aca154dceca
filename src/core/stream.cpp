// The backend-neutral half of samebits/stream.hpp: the device scope and synchronize. Streams,
// events and graphs are in src/cuda/stream.cpp (src/nocuda/stream.cpp without CUDA).
#include "samebits/stream.hpp"

#include "core/memory.hpp"

namespace samebits {

DeviceScope::DeviceScope(Device device)
    : current_(device.is_cuda() ? std::make_unique<detail::CurrentDevice>(device) : nullptr) {}
DeviceScope::~DeviceScope() = default;

void synchronize(Device device, Stream stream) {
  if (device.is_cpu())
    return;
  const detail::CurrentDevice on_device(device);
  detail::cuda_synchronize(stream);
}

} // namespace samebits

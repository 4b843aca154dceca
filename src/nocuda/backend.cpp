// Stand-ins for the CUDA backend in builds without CUDA: no variants, no devices, and a clear
// error from anything that needs a GPU.
#include "core/backends.hpp"
#include "core/memory.hpp"
#include "samebits/errors.hpp"

namespace samebits::detail {

namespace {
[[noreturn]] void unavailable() {
  throw BackendUnavailable(
      "this samebits was built without CUDA (SAMEBITS_CUDA=OFF or no nvcc found); rebuild with "
      "SAMEBITS_CUDA=ON on a machine with the CUDA toolkit to use cuda devices");
}
} // namespace

void register_cuda_ops(Registry&) {}
int cuda_device_count() {
  return 0;
}
void* cuda_allocate(std::size_t, int, Stream) {
  unavailable();
}
void cuda_free(void*, int, Stream) {}
void cuda_release_stream(int, Stream) {}
void cuda_copy(void*, Device, const void*, Device, std::size_t) {
  unavailable();
}
void cuda_copy_strided(const TensorView&, const TensorView&) {
  unavailable();
}
void cuda_synchronize(Stream) {}
void cuda_synchronize_device() {}
void cuda_raise_deferred_index_error(int) {}
CurrentDevice::CurrentDevice(Device) {}
CurrentDevice::~CurrentDevice() = default;

} // namespace samebits::detail

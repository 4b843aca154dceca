// The environment report's CUDA half: driver, runtime and cuBLAS versions and the devices.
// Plain host code (compiled by the C++ compiler against the CUDA runtime headers).
#include "core/backends.hpp"
#include "core/environment_cuda.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <string>

namespace samebits::detail {

void fill_cuda_environment(Environment& e) {
  e.cuda_compiled = true;
  if (cudaDriverGetVersion(&e.cuda_driver_version) != cudaSuccess) {
    cudaGetLastError();
    e.cuda_driver_version = 0;
  }
  if (cudaRuntimeGetVersion(&e.cuda_runtime_version) != cudaSuccess) {
    cudaGetLastError();
    e.cuda_runtime_version = 0;
  }
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    e.cublas_version =
        std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  const int n = cuda_device_count();
  if (n == 0) {
    e.cuda_error = e.cuda_driver_version == 0 ? "no CUDA driver found" : "no CUDA device found";
    return;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      e.cuda_error = std::string("cudaGetDeviceProperties failed for device ") + std::to_string(i) +
                     ": " + cudaGetErrorString(cudaGetLastError());
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.sm_count = p.multiProcessorCount;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.memory_bytes = p.totalGlobalMem;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess)
      g.pci_bus_id = bus;
    else
      cudaGetLastError();
    e.gpus.push_back(std::move(g));
  }
}

} // namespace samebits::detail

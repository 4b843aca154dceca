// samebits/stream.hpp where no GPU is needed: CPU devices are refused by name, synchronize and
// DeviceScope do nothing for the CPU, and without CUDA (or without a device) creating a stream,
// event or graph is BackendUnavailable or CudaError, never a crash.
#include "samebits/stream.hpp"
#include "testing.hpp"

#include <gmock/gmock.h>

namespace samebits {
namespace {

TEST(Stream, CpuDevicesAreRefusedByName) {
  try {
    CudaStream s(Device::cpu());
    ADD_FAILURE() << "a CPU device gave a CUDA stream";
  } catch (const BackendUnavailable& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("CudaStream"));
  }
  EXPECT_THROW(CudaEvent(Device::cpu()), BackendUnavailable);
}

TEST(Stream, SynchronizeAndDeviceScopeDoNothingForTheCpu) {
  EXPECT_NO_THROW(synchronize(Device::cpu()));
  const DeviceScope scope(Device::cpu());
  Tensor x = testing::random_normal({1000}, DType::f32, testing::fresh_seed());
  Tensor total = Tensor::empty({1}, DType::f32);
  EXPECT_NO_THROW(sum(x, total));
}

TEST(Stream, WithoutACudaDeviceStreamsAreAnError) {
  if (cuda_available())
    GTEST_SKIP() << "a CUDA device is present (tests/gpu/test_stream_gpu.cpp runs there)";
  if (cuda_built())
    EXPECT_THROW(CudaStream{Device::cuda()}, Error);
  else
    EXPECT_THROW(CudaStream{Device::cuda()}, BackendUnavailable);
}

} // namespace
} // namespace samebits
